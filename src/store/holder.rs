//! [`Holder`]: who holds a run's lock or lease, in every store's terms.

/// Who holds a run's lock or lease, as seen by a reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// Nobody: the run is not being driven (its process ended or died).
    Nobody,
    /// A process of this machine, with its pid where it can be known.
    Process(Option<u32>),
    /// A node of a database store: its owner id (`<node>:<pid>:<token>`
    /// with `--node-id`, else `<pid>:<token>`), while its lease is valid.
    Node(String),
}

impl std::fmt::Display for Holder {
    /// `pid 4242`, `another process`, `node n1 (pid 4242)`.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::Nobody => formatter.write_str("nobody"),
            Holder::Process(Some(pid)) => write!(formatter, "pid {pid}"),
            Holder::Process(None) => formatter.write_str("another process"),
            Holder::Node(owner) => {
                let mut parts = owner.rsplitn(3, ':').skip(1);
                match (parts.next(), parts.next()) {
                    (Some(pid), Some(node)) => write!(formatter, "node {node} (pid {pid})"),
                    (Some(pid), None) => write!(formatter, "pid {pid} (a node without `--node-id`)"),
                    _ => write!(formatter, "owner `{owner}`"),
                }
            }
        }
    }
}
