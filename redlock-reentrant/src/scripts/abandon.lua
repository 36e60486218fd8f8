-- Give up every nested hold of one owner at once (client shutdown), and announce the release.
-- KEYS[1]: the lock hash. ARGV[1]: the owner. ARGV[2]: the lock's channel. ARGV[3]: the message.
-- Returns 1 when the owner's lock was deleted, 0 when it did not hold it here.
if redis.call('type', KEYS[1])['ok'] ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[2], ARGV[3])
return 1
