-- Release one hold of a reentrant lock on one node; the last release deletes the lock and
-- announces it to waiters. A retried request gets the answer of the first.
-- KEYS[1]: the lock hash. KEYS[2]: this request's latch key.
-- ARGV[1]: the owner. ARGV[2]: the lock's channel. ARGV[3]: the release message.
-- ARGV[4]: how long the latch remembers the answer, in milliseconds.
-- Returns the holds left (0: the lock is free), or -1 when the owner does not hold it here.
local answered = redis.call('get', KEYS[2])
if answered then
    return tonumber(answered)
end
if redis.call('type', KEYS[1])['ok'] ~= 'hash' then
    return -1
end
local held = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if held == 0 then
    return -1
end
local left = held - 1
if left == 0 then
    redis.call('del', KEYS[1])
    redis.call('publish', ARGV[2], ARGV[3])
else
    redis.call('hset', KEYS[1], ARGV[1], left)
end
redis.call('set', KEYS[2], left, 'PX', ARGV[4])
return left
