-- What one node knows of a read-write lock's read side (after lua/rw_common.lua), with
-- lua/inspect.lua's reply. KEYS[1]: the readers hash. KEYS[2]: the node's fencing counter.
-- ARGV[1]: the asking owner's hold field.
-- Returns {exists (some reader is live), the asking owner's read count, how long the latest
-- reader's lease runs (-2 with none), the largest reader's count, the fencing counter ('' when
-- none), the reader's digest when exactly one reader holds it ('' otherwise)}.
local counter = redis.call('get', KEYS[2]) or ''
local wrong = not_readers(KEYS[1])
if wrong then
    return wrong
end
local now = now_ms()
local live, latest, count = live_readers(KEYS[1], now, ARGV[1])
if live == 0 then
    return {0, 0, -2, 0, counter, ''}
end
local largest, only = 0, ''
local entries = redis.call('hgetall', KEYS[1])
for i = 1, #entries, 2 do
    local first = string.sub(entries[i], 1, 1)
    if first ~= '~' and first ~= '@' then
        largest = math.max(largest, parse_reader(entries[i + 1]) or 0)
        only = entries[i]
    end
end
local digest = ''
if live == 1 then
    digest = redis.sha1hex(only)
end
return {1, count, latest - now, largest, counter, digest}
