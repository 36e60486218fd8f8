-- Renew many held reentrant locks on one node in one call (the watchdog's batch renewal; the
-- contract is redlock-watchdog's RenewScript); never recreates a lock that is gone, and never
-- shortens a lease (a nested acquisition may have set a longer fixed one).
-- Mirrored by the model checker's `Master::renew` (model/src/master.rs): change both.
-- KEYS[i]: a lock hash. ARGV[1]: the lease in milliseconds. ARGV[i + 1]: the hold's field in
-- KEYS[i].
-- Returns one integer per key: 1 when the hold is there and its lease now runs at least ARGV[1]
-- more, 0 when that hold is not there any more (expired, released, force-unlocked, or the key is
-- not a lock hash).
local lease = tonumber(ARGV[1])
local renewed = {}
for i, key in ipairs(KEYS) do
    local held = redis.pcall('hexists', key, ARGV[i + 1])
    if held == 1 then
        if redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
