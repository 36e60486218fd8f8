-- Prepended to every script that announces a release, as Redis Cluster members run it: on the
-- lock's shard channel (SPUBLISH, Redis 7), heard only by the shard that owns the lock's slot;
-- where the server has no shard channels, on a plain channel, which the cluster broadcasts to
-- every node. Waiters subscribe the same way (SSUBSCRIBE, else SUBSCRIBE).
local function announce(channel, message)
    if not pcall(redis.call, 'spublish', channel, message) then
        redis.call('publish', channel, message)
    end
end
