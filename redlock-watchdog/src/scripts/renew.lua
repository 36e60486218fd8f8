-- Renew many held locks on one node in one call; never recreates a lock that is gone.
-- KEYS[i]: a lock hash. ARGV[1]: the lease in milliseconds. ARGV[i + 1]: the owner field of KEYS[i].
-- Returns one integer per key: 1 when its lease was reset, 0 when that owner no longer holds it
-- (expired, released, force-unlocked, or the key is not a lock hash).
local lease = ARGV[1]
local renewed = {}
for i, key in ipairs(KEYS) do
    local held = redis.pcall('hexists', key, ARGV[i + 1])
    if held == 1 then
        redis.call('pexpire', key, lease)
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
