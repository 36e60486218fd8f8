//! What a server says about its clients and the commands it ran: for tests that check the
//! library's effect on the server itself (subscriptions, pub/sub connections, script calls),
//! not only what the library reports about itself.

use std::collections::BTreeMap;

use crate::RedisServer;

/// Resets the server's command counters (`CONFIG RESETSTAT`).
///
/// # Panics
///
/// If the server does not answer.
pub fn reset_command_stats(server: &RedisServer) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut server.connection())
        .unwrap_or_else(|e| panic!("CONFIG RESETSTAT on port {}: {e}", server.port()));
}

/// Calls per command since the last reset (`INFO commandstats`), lower-case names; commands
/// run inside scripts are counted under their own names.
///
/// # Panics
///
/// If the server does not answer.
pub fn command_calls(server: &RedisServer) -> BTreeMap<String, u64> {
    parse_commandstats(&info(server, "commandstats"))
        .into_iter()
        .collect()
}

/// One section of `INFO`.
fn info(server: &RedisServer, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut server.connection())
        .unwrap_or_else(|e| panic!("INFO {section} on port {}: {e}", server.port()))
}

/// The `{prefix}NAME:...,{field}=N,...` lines of an `INFO` section, as (NAME, N).
fn counts(info: &str, prefix: &str, field: &str) -> Vec<(String, u64)> {
    info.lines()
        .filter_map(|line| {
            let (name, fields) = line.trim().strip_prefix(prefix)?.split_once(':')?;
            let count = fields
                .split(',')
                .find_map(|pair| pair.strip_prefix(field)?.strip_prefix('='))?
                .trim()
                .parse()
                .ok()?;
            Some((name.to_owned(), count))
        })
        .collect()
}

/// `cmdstat_NAME:calls=N,...` lines of `INFO commandstats`.
pub fn parse_commandstats(info: &str) -> Vec<(String, u64)> {
    counts(info, "cmdstat_", "calls")
}

/// How many connections the server has in pub/sub mode, subscribed to something
/// (`CLIENT LIST TYPE pubsub`).
///
/// # Panics
///
/// If the server does not answer.
pub fn pubsub_clients(server: &RedisServer) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut server.connection())
        .unwrap_or_else(|e| panic!("CLIENT LIST on port {}: {e}", server.port()));
    list.lines().filter(|line| !line.trim().is_empty()).count()
}

/// How many client connections the server has (`CLIENT LIST`), the one asking included.
///
/// # Panics
///
/// If the server does not answer.
pub fn client_connections(server: &RedisServer) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.connection())
        .unwrap_or_else(|e| panic!("CLIENT LIST on port {}: {e}", server.port()));
    list.lines().filter(|line| !line.trim().is_empty()).count()
}

/// How many connections are subscribed to `channel` (`PUBSUB NUMSUB`).
///
/// # Panics
///
/// If the server does not answer.
pub fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    channel_count(server, "NUMSUB", channel)
}

/// How many clients are subscribed to the shard channel `channel` on the server (`PUBSUB
/// SHARDNUMSUB`, Redis 7): the sharded twin of [`subscribers`].
///
/// # Panics
///
/// If the server does not answer.
pub fn shard_subscribers(server: &RedisServer, channel: &str) -> i64 {
    channel_count(server, "SHARDNUMSUB", channel)
}

/// `PUBSUB <subcommand> channel`'s count for the one channel.
fn channel_count(server: &RedisServer, subcommand: &str, channel: &str) -> i64 {
    let (_, count): (String, i64) = redis::cmd("PUBSUB")
        .arg(subcommand)
        .arg(channel)
        .query(&mut server.connection())
        .unwrap_or_else(|e| panic!("PUBSUB {subcommand} on port {}: {e}", server.port()));
    count
}

/// Closes every pub/sub connection of the server (`CLIENT KILL TYPE pubsub`); returns how
/// many it closed.
///
/// # Panics
///
/// If the server does not answer.
pub fn kill_pubsub_clients(server: &RedisServer) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut server.connection())
        .unwrap_or_else(|e| panic!("CLIENT KILL on port {}: {e}", server.port()))
}

/// Closes every RESP3 connection of the server (the pub/sub connections of a Redis Cluster
/// member's waiters, whose requests speak RESP2), subscribed or idle; returns how many.
///
/// # Panics
///
/// If the server does not answer.
pub fn kill_resp3_clients(server: &RedisServer) -> usize {
    let mut connection = server.connection();
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut connection)
        .unwrap_or_else(|e| panic!("CLIENT LIST on port {}: {e}", server.port()));
    let ids: Vec<&str> = clients
        .lines()
        .filter(|client| client.split_whitespace().any(|field| field == "resp=3"))
        .filter_map(|client| client.strip_prefix("id=")?.split(' ').next())
        .collect();
    for id in &ids {
        let _: redis::Value = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query(&mut connection)
            .unwrap_or_else(|e| panic!("CLIENT KILL on port {}: {e}", server.port()));
    }
    ids.len()
}

/// How many requests the server refused with each error code so far (`INFO errorstats`):
/// `TRYAGAIN`, `ASK`, `NOPERM`, ...
///
/// # Panics
///
/// If the server does not answer.
pub fn error_counts(server: &RedisServer) -> BTreeMap<String, u64> {
    parse_errorstats(&info(server, "errorstats"))
        .into_iter()
        .collect()
}

/// `errorstat_CODE:count=N` lines of `INFO errorstats`.
pub fn parse_errorstats(info: &str) -> Vec<(String, u64)> {
    counts(info, "errorstat_", "count")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errorstats_lines_are_read() {
        let info =
            "# Errorstats\r\nerrorstat_ERR:count=224\r\nerrorstat_TRYAGAIN:count=2\r\nnoise\r\n";
        assert_eq!(
            parse_errorstats(info),
            vec![("ERR".to_owned(), 224), ("TRYAGAIN".to_owned(), 2)]
        );
    }

    #[test]
    fn commandstats_lines_are_read() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=30,usec_per_call=2.5\r\ncmdstat_publish:calls=3,usec=1\r\nnoise\r\n";
        assert_eq!(
            parse_commandstats(info),
            vec![("evalsha".to_owned(), 12), ("publish".to_owned(), 3)]
        );
    }
}
