//! ListExecutions' filters and pages over SQLite, against a brute-force
//! filter and sort of the same rows (a property test).

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::history::{Db, History, Retention};
use crate::metrics::Metrics;

/// One archived execution as the test inserts it.
#[derive(Debug, Clone)]
struct Exec {
    uid: String,
    ns: &'static str,
    name: String,
    phase: &'static str,
    template: Option<&'static str>,
    started: i64,
    labels: Vec<(&'static str, &'static str)>,
}

fn exec() -> impl Strategy<Value = Exec> {
    (
        prop::sample::select(vec!["team-a", "team-b"]),
        prop::sample::select(vec!["train", "train_x", "etl", "t%"]),
        prop::sample::select(vec!["Succeeded", "Failed", "Aborted"]),
        prop::option::of(prop::sample::select(vec!["team-a/nightly", "team-b/adhoc"])),
        0i64..6,
        prop::sample::subsequence(
            vec![("team", "ml"), ("env", "prod"), ("tier", "gold")],
            0..=3,
        ),
        any::<bool>(),
    )
        .prop_map(
            |(ns, name, phase, template, started, mut labels, other_team)| {
                if other_team {
                    labels.retain(|(k, _)| *k != "team");
                    labels.push(("team", "data"));
                }
                Exec {
                    uid: String::new(),
                    ns,
                    name: name.to_string(),
                    phase,
                    template,
                    started: 1_000 + started,
                    labels,
                }
            },
        )
}

fn filter() -> impl Strategy<Value = Filter> {
    let label = prop::sample::select(vec![
        LabelTerm::Equals("team".into(), "ml".into()),
        LabelTerm::NotEquals("team".into(), "ml".into()),
        LabelTerm::Exists("env".into()),
        LabelTerm::Absent("tier".into()),
    ]);
    (
        prop::option::of(prop::sample::select(vec!["team-a", "team-b"])),
        prop::option::of(prop::sample::select(vec!["Succeeded", "Failed"])),
        prop::collection::vec(label, 0..=2),
        prop::option::of(prop::sample::select(vec!["team-a/nightly", "team-b/adhoc"])),
        prop::option::of(prop::sample::select(vec!["train", "t%", "train_", "e"])),
        prop::option::of(1_000i64..1_006),
        prop::option::of(1_000i64..1_007),
    )
        .prop_map(
            |(ns, phase, labels, template, prefix, after, before)| Filter {
                namespace: ns.map(String::from),
                phase: phase.map(String::from),
                labels,
                template: template.map(String::from),
                name_prefix: prefix.map(String::from),
                started_after: after,
                started_before: before,
            },
        )
}

fn matches(e: &Exec, f: &Filter) -> bool {
    let label = |k: &str| e.labels.iter().find(|(l, _)| *l == k).map(|(_, v)| *v);
    f.namespace.as_deref().is_none_or(|n| n == e.ns)
        && f.phase.as_deref().is_none_or(|p| p == e.phase)
        && f.template.as_deref().is_none_or(|t| Some(t) == e.template)
        && f.name_prefix
            .as_deref()
            .is_none_or(|p| e.name.starts_with(p))
        && f.started_after.is_none_or(|t| e.started >= t)
        && f.started_before.is_none_or(|t| e.started < t)
        && f.labels.iter().all(|t| match t {
            LabelTerm::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelTerm::Exists(k) => label(k).is_some(),
            LabelTerm::Absent(k) => label(k).is_none(),
        })
}

async fn insert(h: &History, e: &Exec) {
    sqlx::query(
        "INSERT INTO executions (uid, namespace, name, phase, template, created_at, started_at, \
         archived_at, labels, workflow) VALUES ($1, $2, $3, $4, $5, 0, $6, 0, '{}', $7)",
    )
    .bind(e.uid.clone())
    .bind(e.ns)
    .bind(e.name.clone())
    .bind(e.phase)
    .bind(e.template)
    .bind(e.started)
    .bind(format!("{{\"uid\": \"{}\"}}", e.uid))
    .execute(&h.db().pool)
    .await
    .unwrap();
    for (k, v) in &e.labels {
        sqlx::query("INSERT INTO execution_labels (uid, key, value) VALUES ($1, $2, $3)")
            .bind(e.uid.clone())
            .bind(*k)
            .bind(*v)
            .execute(&h.db().pool)
            .await
            .unwrap();
    }
}

async fn history(dir: &tempfile::TempDir) -> Arc<History> {
    let url = format!("sqlite:{}/h.db", dir.path().display());
    let h = History::start(
        Db::open(&url).unwrap(),
        Arc::new(Metrics::default()),
        Retention::default(),
    );
    for _ in 0..500 {
        if h.health().is_ok() {
            return h;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("history not up: {:?}", h.health());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pages_of_a_filter_are_the_brute_force_answer_in_order(
        mut execs in prop::collection::vec(exec(), 0..30),
        f in filter(),
        page in 1i64..7,
    ) {
        for (i, e) in execs.iter_mut().enumerate() {
            e.uid = format!("u{:02}", (i * 7) % 31);
        }
        execs.sort_by(|a, b| a.uid.cmp(&b.uid));
        execs.dedup_by(|a, b| a.uid == b.uid);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (got, pages) = rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let h = history(&dir).await;
            for e in &execs {
                insert(&h, e).await;
            }
            let (mut got, mut after, mut pages) = (Vec::new(), None::<Cursor>, 0);
            loop {
                let rows = h.list(&f, after.as_ref(), page).await.unwrap();
                pages += 1;
                got.extend(rows.iter().map(|r| r.key.uid.clone()));
                if (rows.len() as i64) < page {
                    break;
                }
                after = rows.last().map(|r| Cursor::parse(&r.key.token()).unwrap());
            }
            (got, pages)
        });
        let mut expected: Vec<&Exec> = execs.iter().filter(|e| matches(e, &f)).collect();
        expected.sort_by(|a, b| (b.started, &b.uid).cmp(&(a.started, &a.uid)));
        let expected: Vec<String> = expected.iter().map(|e| e.uid.clone()).collect();
        prop_assert_eq!(&got, &expected, "filter {:?}, page {}", f, page);
        prop_assert!(pages as usize <= expected.len() / page as usize + 1);
    }
}

#[test]
fn selectors_parse_and_set_based_ones_are_refused_by_name() {
    let terms = parse_selector("team=ml, env!=dev,tier,!legacy,a==b").unwrap();
    assert_eq!(
        terms,
        [
            LabelTerm::Equals("team".into(), "ml".into()),
            LabelTerm::NotEquals("env".into(), "dev".into()),
            LabelTerm::Exists("tier".into()),
            LabelTerm::Absent("legacy".into()),
            LabelTerm::Equals("a".into(), "b".into()),
        ]
    );
    let err = parse_selector("env in (a, b)").unwrap_err();
    assert!(err.contains("\"env in (a\""), "{err}");
}
