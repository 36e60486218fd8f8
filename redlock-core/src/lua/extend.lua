-- Compare-and-extend on one node; never recreates a key that is gone, and never shortens a lease:
-- a shorter new lease leaves the longer one in place, so whatever the outcome of an extend
-- (granted, refused, timed out, or its future dropped with requests still queued), the holder's
-- earlier validity stays true on this node.
-- KEYS[1]: the lock key. ARGV[1]: the owner token. ARGV[2]: the new lease in milliseconds.
-- Returns 1 when we hold the key and its lease now runs at least ARGV[2] more, 0 otherwise.
if redis.call('type', KEYS[1])['ok'] == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    local lease = tonumber(ARGV[2])
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return 1
end
return 0
