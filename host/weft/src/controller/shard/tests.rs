use std::collections::BTreeMap;

use super::*;

#[test]
fn every_workflow_has_exactly_one_owner() {
    let shards: Vec<Shard> = (0..3)
        .map(|i| Shard::new(i, 3, ShardKey::Name).unwrap())
        .collect();
    let mut per_shard = [0; 3];
    for n in 0..300 {
        let owners: Vec<u32> = shards
            .iter()
            .filter(|s| s.owns("default", &format!("wf-{n}"), &BTreeMap::new()))
            .map(|s| s.index)
            .collect();
        assert_eq!(owners.len(), 1, "wf-{n}: owners {owners:?}");
        per_shard[owners[0] as usize] += 1;
    }
    // A fair hash: no shard is starved.
    assert!(per_shard.iter().all(|&c| c > 70), "{per_shard:?}");
}

#[test]
fn a_label_keeps_a_team_together() {
    let key: ShardKey = "label:team".parse().unwrap();
    let s = Shard::new(0, 4, key).unwrap();
    let team = BTreeMap::from([("team".to_string(), "a".to_string())]);
    let first = s.of("ns1", "x", &team);
    for n in 0..20 {
        assert_eq!(s.of(&format!("ns{n}"), &format!("wf{n}"), &team), first);
    }
    // No label: by name.
    assert_eq!(
        s.of("default", "y", &BTreeMap::new()),
        shard_of("default/y", 4)
    );
}

#[test]
fn bad_shards_are_named() {
    assert!(
        Shard::new(2, 2, ShardKey::Name)
            .unwrap_err()
            .contains("0 to 1")
    );
    assert!(Shard::new(0, 0, ShardKey::Name).is_err());
    let e = "label:".parse::<ShardKey>().unwrap_err();
    assert!(e.contains("label:<label key>"), "{e}");
    assert!("hash".parse::<ShardKey>().is_err());
}

#[test]
fn one_shard_owns_everything() {
    let s = Shard::new(0, 1, ShardKey::Name).unwrap();
    assert!(s.owns("a", "b", &BTreeMap::new()));
}
