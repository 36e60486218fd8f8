//! Counting the commands Redis ran: `CONFIG RESETSTAT` before a run, `INFO commandstats`
//! after, summed over the nodes. Commands run inside Lua scripts are counted by Redis too; they
//! are told apart by the names the implementation's scripts call.

use std::collections::{BTreeMap, BTreeSet};

use redlock_testkit::{parse_commandstats, RedisCluster};

use crate::locker::Kind;

/// Commands the benchmark itself sends to read the counters: never counted.
fn is_measurement(command: &str) -> bool {
    command == "info" || command.starts_with("config")
}

/// Resets the counters of the first `nodes` nodes.
pub(crate) fn reset(cluster: &RedisCluster, nodes: usize) -> Result<(), String> {
    for node in &cluster.nodes()[..nodes] {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .exec(&mut node.try_connection().map_err(|e| e.to_string())?)
            .map_err(|e| format!("CONFIG RESETSTAT: {e}"))?;
    }
    Ok(())
}

/// Calls per command since the last reset, summed over the first `nodes` nodes.
pub(crate) fn calls(cluster: &RedisCluster, nodes: usize) -> Result<BTreeMap<String, u64>, String> {
    let mut calls = BTreeMap::new();
    for node in &cluster.nodes()[..nodes] {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut node.try_connection().map_err(|e| e.to_string())?)
            .map_err(|e| format!("INFO commandstats: {e}"))?;
        for (command, count) in parse_commandstats(&info) {
            if !is_measurement(&command) {
                *calls.entry(command).or_insert(0) += count;
            }
        }
    }
    Ok(calls)
}

/// The command names an implementation's Lua scripts call: what Redis counts but no client
/// sent. Ours are read from the library crates' `src/lua/*.lua` files, so they follow the
/// library; finding none is a bug of this benchmark (a moved folder), not a result.
pub(crate) fn script_commands(kind: Kind) -> BTreeSet<String> {
    match kind {
        Kind::Ours | Kind::OursLease | Kind::Core => {
            let mut names = BTreeSet::new();
            for crate_dir in ["redlock-core", "redlock-reentrant", "redlock-watchdog"] {
                let dir = crate::paths::workspace().join(crate_dir).join("src/lua");
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    if let Ok(source) = std::fs::read_to_string(entry.path()) {
                        names.extend(lua_calls(&source));
                    }
                }
            }
            assert!(
                !names.is_empty(),
                "no Lua script found under the library crates' src/lua: requests per \
                 acquisition would count the scripts' own commands"
            );
            names
        }
        Kind::Raw => lua_calls(crate::raw::RELEASE_SCRIPT),
        Kind::Rslock => crate::theirs::SCRIPT_COMMANDS
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    }
}

/// The lower-cased names in `redis.call('name'` and `redis.pcall("name"`.
pub(crate) fn lua_calls(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for call in ["redis.call(", "redis.pcall("] {
        for (at, _) in source.match_indices(call) {
            let rest = source[at + call.len()..].trim_start();
            let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
                continue;
            };
            if let Some(end) = rest[1..].find(quote) {
                names.insert(rest[1..=end].to_lowercase());
            }
        }
    }
    names
}

/// All commands, and those a client sent (the rest ran inside scripts).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counted {
    pub(crate) all: u64,
    pub(crate) requests: u64,
}

pub(crate) fn count(calls: &BTreeMap<String, u64>, kind: Kind) -> Counted {
    let internal = script_commands(kind);
    let all = calls.values().sum();
    let requests = calls
        .iter()
        .filter(|(name, _)| !internal.contains(name.as_str()))
        .map(|(_, n)| n)
        .sum();
    Counted { all, requests }
}
