//! The shared setup of the lock workloads: a 1-node and a 5-node set of local redis-server
//! masters, and every implementation connected to them once.

use redlock_testkit::RedisCluster;
use tokio::runtime::Runtime;

use crate::locker::{Locker, Spec};

pub(crate) struct Lab {
    one: RedisCluster,
    five: RedisCluster,
    pub(crate) lockers: Vec<(Spec, Locker)>,
}

impl Lab {
    /// Starts the servers and connects `specs`.
    pub(crate) fn start(runtime: &Runtime, specs: &[Spec]) -> Result<Self, String> {
        let one = RedisCluster::try_start(1).map_err(|e| e.to_string())?;
        let five = RedisCluster::try_start(5).map_err(|e| e.to_string())?;
        let mut lockers = Vec::new();
        for &spec in specs {
            let urls = if spec.nodes == 1 {
                one.urls()
            } else {
                five.urls()
            };
            let locker = runtime
                .block_on(Locker::connect(spec, &urls))
                .map_err(|e| format!("{spec}: {e}"))?;
            lockers.push((spec, locker));
        }
        Ok(Self { one, five, lockers })
    }

    /// The nodes `spec` runs on.
    pub(crate) fn cluster(&self, spec: Spec) -> &RedisCluster {
        if spec.nodes == 1 {
            &self.one
        } else {
            &self.five
        }
    }

    pub(crate) fn close(self, runtime: &Runtime) {
        for (_, locker) in &self.lockers {
            runtime.block_on(locker.close());
        }
    }
}
