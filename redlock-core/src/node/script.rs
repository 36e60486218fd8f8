//! What a request carries: a script call packed once for every node of a fan-out (with its
//! cluster variant), or a plain command.

use std::sync::Arc;

use redis::Cmd;

use crate::cluster::hash_slot;
use crate::{LockScript, ScriptCall};

/// What to send: a script (by SHA when the node has it cached) or a plain command.
#[derive(Clone)]
pub(crate) enum Request {
    Script(Arc<PreparedScript>),
    Command(Arc<Cmd>),
}

/// A script call packed once for every node of a fan-out.
pub(crate) struct PreparedScript {
    /// What standalone masters run.
    standalone: Variant,
    /// What cluster members run, when it differs.
    on_cluster: Option<Variant>,
    pub(super) by_source: bool,
    releasing: bool,
    pub(super) replicated: bool,
    /// The slot of the call's keys on a cluster.
    pub(super) slot: Option<u16>,
}

/// One script of a call, packed.
pub(super) struct Variant {
    pub(super) evalsha: Arc<Cmd>,
    pub(super) sha: &'static str,
    source: &'static str,
}

impl Variant {
    fn new(call: &ScriptCall, script: &'static LockScript) -> Self {
        Self {
            evalsha: call.evalsha_of(script),
            sha: script.sha(),
            source: script.source(),
        }
    }

    /// The same call with the script's source (`EVAL`), built only when needed.
    pub(super) fn eval(&self) -> Arc<Cmd> {
        let mut eval = redis::cmd("EVAL");
        eval.arg(self.source);
        for arg in crate::lock_script::words(&self.evalsha).skip(2) {
            eval.arg(arg);
        }
        Arc::new(eval)
    }
}

impl PreparedScript {
    /// Packs `call` for the nodes of a set: its cluster variant too only when some of them
    /// (`to_cluster`) are Redis Cluster members.
    pub(crate) fn new(call: &ScriptCall, to_cluster: bool) -> Self {
        Self {
            standalone: Variant::new(call, call.script_for(false)),
            on_cluster: (to_cluster && call.has_cluster_variant())
                .then(|| Variant::new(call, call.script_for(true))),
            by_source: call.is_by_source(),
            releasing: call.is_releasing(),
            replicated: call.is_replicated(),
            slot: call.first_key().map(hash_slot),
        }
    }

    /// The script a node of this kind runs.
    pub(super) fn variant(&self, cluster: bool) -> &Variant {
        match &self.on_cluster {
            Some(variant) if cluster => variant,
            _ => &self.standalone,
        }
    }
}

impl Request {
    /// Whether it releases what earlier requests may have taken: sent even to an unresponsive
    /// node.
    pub(crate) fn is_releasing(&self) -> bool {
        matches!(self, Request::Script(script) if script.releasing)
    }
}
