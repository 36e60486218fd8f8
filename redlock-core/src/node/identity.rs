//! Which server each node reached, so that one server reached under two names never votes
//! twice.

use crate::unpoisoned::unpoisoned;
use std::collections::HashSet;
use std::sync::Mutex;

/// The servers a set's standalone nodes turned out to be, by run id (`INFO server`): one server
/// reached under two names (a DNS alias, a second address of it) must not vote twice. The node
/// that reaches a server first keeps it; another that reaches the same server never connects.
/// Configured addresses that name one server are refused before this (`DuplicateNode`).
#[derive(Debug, Default)]
pub(crate) struct Identities {
    claimed: Mutex<std::collections::HashMap<String, usize>>,
    /// Nodes already reported as aliases (reported once, loudly).
    reported: Mutex<HashSet<usize>>,
}

impl Identities {
    /// Claims the servers `ids` (a standalone server's run id, or every node id of a Redis
    /// Cluster) for `node`, giving up those it had before (a restart, a name now pointing
    /// elsewhere); the node that had claimed one of them, if another.
    pub(super) fn claim(&self, ids: &[&str], node: usize) -> Result<(), usize> {
        let mut claimed = unpoisoned(self.claimed.lock());
        if let Some(&first) = ids
            .iter()
            .filter_map(|id| claimed.get(*id))
            .find(|owner| **owner != node)
        {
            return Err(first);
        }
        claimed.retain(|_, owner| *owner != node);
        claimed.extend(ids.iter().map(|id| ((*id).to_owned(), node)));
        Ok(())
    }

    /// Whether `node` is reported as an alias for the first time.
    pub(super) fn first_report(&self, node: usize) -> bool {
        unpoisoned(self.reported.lock()).insert(node)
    }
}

/// The run id in an `INFO server` reply.
pub(super) fn run_id_of(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_reached_by_two_nodes_is_kept_by_the_first() {
        let identities = Identities::default();
        assert_eq!(identities.claim(&["abc"], 0), Ok(()));
        assert_eq!(identities.claim(&["abc"], 0), Ok(()), "a reconnection");
        assert_eq!(identities.claim(&["abc"], 2), Err(0));
        assert_eq!(
            identities.claim(&["def"], 2),
            Ok(()),
            "its own server after a restart"
        );
        // Node 0's name now points at another server: its old one is free for node 2.
        assert_eq!(identities.claim(&["ghi"], 0), Ok(()));
        assert_eq!(identities.claim(&["abc"], 2), Ok(()));
        // A cluster claims all its nodes: one of them claimed by another node is an alias.
        assert_eq!(identities.claim(&["c1", "c2", "c3"], 1), Ok(()));
        assert_eq!(identities.claim(&["c3", "c4"], 0), Err(1));
        assert_eq!(
            identities.claim(&["c2", "c3", "c1"], 1),
            Ok(()),
            "reconnected"
        );
        assert!(identities.first_report(2));
        assert!(!identities.first_report(2), "reported once");
        assert_eq!(
            run_id_of("# Server\r\nredis_version:7.0.15\r\nrun_id:5e1f00\r\ntcp_port:1\r\n"),
            Some("5e1f00")
        );
        assert_eq!(run_id_of("# Server\r\n"), None);
    }
}
