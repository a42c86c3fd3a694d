//! How an `http` step's host name becomes addresses: the seam between
//! the egress policy and DNS. The tool resolves a name ONCE per hop,
//! judges every address it got, and connects to the one it judged (the
//! client never resolves the name again), so a name that answers a public
//! address to the check and a private one to the connection (DNS
//! rebinding) reaches nothing it was not allowed to.
//!
//! [`SystemResolver`] asks the system (`getaddrinfo`). [`StubResolver`]
//! answers from a fixed table, the n-th question about a name with its
//! n-th answer (cycling): the tests give one name two answers through the
//! documented test hook `PLANRUN_TEST_RESOLVE` (see docs/effects.md) and
//! prove the connection went to the first.

use std::collections::BTreeMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Mutex;

/// Host name → addresses.
pub trait Resolve: Send + Sync {
    /// The addresses of `host`, in preference order; an error names why
    /// there are none.
    fn lookup(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String>;
}

/// The system's resolver.
#[derive(Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        let addresses = (host, port).to_socket_addrs().map_err(|error| format!("cannot resolve `{host}`: {error}"))?;
        let found: Vec<IpAddr> = addresses.map(|address| address.ip()).collect();
        if found.is_empty() {
            return Err(format!("cannot resolve `{host}`: no address"));
        }
        Ok(found)
    }
}

/// Fixed answers: `name=ADDR[,ADDR…][;name=…]`; each question about a
/// name takes its next answer. A name not in the table does not resolve
/// (the system is never asked).
#[derive(Debug)]
pub struct StubResolver {
    answers: BTreeMap<String, Vec<IpAddr>>,
    asked: Mutex<BTreeMap<String, usize>>,
}

impl StubResolver {
    pub fn parse(text: &str) -> Result<StubResolver, String> {
        let mut answers = BTreeMap::new();
        for entry in text.split(';').map(str::trim).filter(|entry| !entry.is_empty()) {
            let (name, list) = entry.split_once('=').ok_or_else(|| format!("`{entry}` is not `name=address,…`"))?;
            let addresses = list
                .split(',')
                .map(|address| {
                    address.trim().parse::<IpAddr>().map_err(|_| format!("`{address}` is not an IP address"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            answers.insert(name.trim().to_ascii_lowercase(), addresses);
        }
        Ok(StubResolver { answers, asked: Mutex::new(BTreeMap::new()) })
    }
}

impl Resolve for StubResolver {
    fn lookup(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, String> {
        let answers = self.answers.get(host).ok_or_else(|| format!("cannot resolve `{host}`: not in the stub"))?;
        let mut asked = self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = asked.entry(host.to_string()).or_insert(0);
        let answer = answers[*count % answers.len()];
        *count += 1;
        Ok(vec![answer])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stub_answers_each_question_with_the_next_address() {
        let stub = StubResolver::parse("rebind.test=127.0.0.1,10.0.0.1; other.test=::1").expect("stub");
        let first = stub.lookup("rebind.test", 80).expect("first");
        let second = stub.lookup("rebind.test", 80).expect("second");
        assert_eq!((first[0].to_string(), second[0].to_string()), ("127.0.0.1".into(), "10.0.0.1".into()));
        assert!(stub.lookup("unknown.test", 80).is_err());
        assert!(StubResolver::parse("x=not-an-ip").is_err());
    }
}
