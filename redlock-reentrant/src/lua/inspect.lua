-- What one node knows of a reentrant lock.
-- KEYS[1]: the lock hash. KEYS[2]: the node's fencing counter. ARGV[1]: the asking owner's hold
-- field.
-- Returns {exists (0/1), the asking owner's hold count, pttl in milliseconds (-2 when absent),
-- the holder's hold count (the largest field; 0 when free), the fencing counter ('' when none),
-- the holder's digest (the SHA-1 of its hold field when one hold has it here, '' otherwise:
-- it tells nodes held by one hold from a split, and no owner token leaves the server)}.
-- A key of another type, or a hash without an expiry (never one of ours), is an error.
local counter = redis.call('get', KEYS[2]) or ''
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return {0, 0, -2, 0, counter, ''}
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
end
local pttl = redis.call('pttl', KEYS[1])
if pttl < 0 then
    return redis.error_reply('WRONGTYPE lock key holds a hash with no expiry')
end
local holder = 0
local fields = redis.call('hgetall', KEYS[1])
for i = 2, #fields, 2 do
    holder = math.max(holder, tonumber(fields[i]) or 0)
end
local digest = ''
if #fields == 2 then
    digest = redis.sha1hex(fields[1])
end
return {1, tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0'), pttl, holder, counter, digest}
