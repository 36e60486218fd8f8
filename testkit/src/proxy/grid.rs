//! A grid of proxies, one per (worker, node), for asymmetric partitions.

use std::io;
use std::net::SocketAddr;

use super::{Fault, FaultProxy};

/// One [`FaultProxy`] per (worker, node): rows are workers, columns nodes, so a fault can cut one
/// worker off from a node while the others still reach it.
///
/// # Panics
///
/// The methods taking a `worker` or a `node` panic if it is out of range.
#[derive(Debug)]
pub struct ProxyGrid {
    upstreams: Vec<SocketAddr>,
    rows: Vec<Vec<FaultProxy>>,
}

impl ProxyGrid {
    /// Starts `workers` rows of proxies, one per upstream (node) in each.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the proxies started so far are dropped, which stops them.
    ///
    /// # Errors
    ///
    /// If a proxy cannot bind its listener.
    pub async fn start(workers: usize, upstreams: &[SocketAddr]) -> io::Result<ProxyGrid> {
        let mut grid = ProxyGrid {
            upstreams: upstreams.to_vec(),
            rows: Vec::with_capacity(workers),
        };
        for _ in 0..workers {
            grid.add_worker().await?;
        }
        Ok(grid)
    }

    /// Adds a row of proxies (all [`Fault::Pass`]) for a new worker, e.g. one replacing a
    /// crashed one, and returns its index.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: no row is added unless the future completes.
    ///
    /// # Errors
    ///
    /// If a proxy cannot bind its listener.
    pub async fn add_worker(&mut self) -> io::Result<usize> {
        let mut row = Vec::with_capacity(self.upstreams.len());
        for &upstream in &self.upstreams {
            row.push(FaultProxy::start(upstream).await?);
        }
        self.rows.push(row);
        Ok(self.rows.len() - 1)
    }

    /// How many workers (rows) the grid has.
    pub fn workers(&self) -> usize {
        self.rows.len()
    }

    /// The proxy between `worker` and `node`.
    pub fn proxy(&self, worker: usize, node: usize) -> &FaultProxy {
        &self.rows[worker][node]
    }

    /// That worker's URL for each node, in node order.
    pub fn urls(&self, worker: usize) -> Vec<String> {
        self.rows[worker].iter().map(FaultProxy::url).collect()
    }

    /// Applies `fault` between `worker` and `node`.
    pub fn set(&self, worker: usize, node: usize, fault: Fault) {
        self.proxy(worker, node).set(fault);
    }

    /// Applies `fault` between every worker and `node`.
    pub fn set_node(&self, node: usize, fault: Fault) {
        for row in &self.rows {
            row[node].set(fault);
        }
    }

    /// Applies `fault` between `worker` and every node.
    pub fn set_worker(&self, worker: usize, fault: Fault) {
        for proxy in &self.rows[worker] {
            proxy.set(fault);
        }
    }

    /// Puts every proxy back to [`Fault::Pass`].
    pub fn heal(&self) {
        for proxy in self.rows.iter().flatten() {
            proxy.set(Fault::Pass);
        }
    }

    /// The fault between `worker` and `node`.
    pub fn fault(&self, worker: usize, node: usize) -> Fault {
        self.proxy(worker, node).fault()
    }
}
