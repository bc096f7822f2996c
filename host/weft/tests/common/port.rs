//! Loopback ports for the servers tests and benches start.

/// A loopback port nobody listens on (free when asked; the caller binds it
/// next).
///
/// Taken below the kernel's ephemeral range (32768–60999 here): a port the
/// kernel hands out for `:0` can be taken again, before the caller binds
/// it, as the source port of any outgoing connection (CI once saw
/// kube-apiserver refused its port so). Each port is handed out once per
/// process, so two tests in one file never get the same one.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let start = (std::process::id().wrapping_mul(7_919) ^ nanos) % SPAN;
    let mut given = GIVEN.lock().unwrap();
    let given = given.get_or_insert_with(HashSet::new);
    for i in 0..SPAN {
        let port = (LOW + (start + i * 97) % SPAN) as u16;
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free loopback port in {LOW}..{}", LOW + SPAN)
}
