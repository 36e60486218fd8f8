-- Take or re-enter a reentrant lock on one node.
-- Mirrored by the model checker's `Master::acquire` (model/src/master.rs): change both.
-- KEYS[1]: the lock hash (field = the hold: its owner and generation; value = hold count).
-- KEYS[2]: the node's fencing counter.
-- ARGV[1]: the hold's field (a new one for each attempt at a new hold, so a late request of an
-- earlier hold never touches a later one). ARGV[2]: the lease in milliseconds. ARGV[3]: the
-- hold count the owner expects to find here (0 for a new hold). ARGV[4]: the smallest fencing
-- candidate the client wants (the token after the largest it has seen; 0 for none). ARGV[5]:
-- the owner's prefix of its holds' fields (`{owner}:`).
-- Returns {status, value, holder}:
--   {1, candidate, ''}  a new hold; candidate is this node's fencing-token candidate
--   {2, count, ''}      a reentrant acquisition; count is the new hold count
--   {0, pttl, holder}   held by another owner (holder: its field) for pttl more milliseconds
--   {3, count, ''}      the hold's count here is not the expected one (the hold was lost here,
--                       or this is a second copy of a new hold's request: counted once)
-- A new hold takes over what is left of an earlier hold of the same owner (one it gave up as
-- lost, or whose fixed lease ran out): the owner asks for a new hold only when it holds none,
-- and a late request of the earlier hold names that hold's field, gone from then on. Only an
-- earlier one (a smaller number after the prefix): a late attempt of an earlier hold finds a
-- later hold in its way, as any other holder.
-- A key of another type, or a hash without an expiry (never one of ours), is an error.
-- A reentrant acquisition never shortens the lease: the hold keeps the longest one asked for.
-- The lock kind's prelude defines `refuse_new`, `on_new_hold` and `refused_by` (the answer when
-- another owner holds KEYS[1]): lua/acquire_plain.lua for a reentrant lock,
-- lua/acquire_write.lua for a read-write lock's write side, lua/acquire_fair.lua for a fair
-- lock.
-- Fewest calls on the common paths: PTTL tells a free key (-2) and a key without an expiry
-- (-1); HGET tells another type (an error), and the key's type is asked only to say which.

-- A new hold of KEYS[1] for the field ARGV[1], with its fencing candidate; the lock kind's
-- prelude says first whether anything else of the lock is in the way (`refuse_new`), and what
-- else a new hold changes (`on_new_hold`).
local function new_hold()
    local refused = refuse_new()
    if refused then
        return refused
    end
    redis.call('hset', KEYS[1], ARGV[1], 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    on_new_hold()
    return {1, fencing_candidate(), ''}
end

local expected = tonumber(ARGV[3])
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    if expected > 0 then
        return {3, 0, ''}
    end
    return new_hold()
end
local held = redis.pcall('hget', KEYS[1], ARGV[1])
if type(held) == 'table' and held['err'] then
    local kind = redis.call('type', KEYS[1])['ok']
    return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
end
if pttl < 0 then
    return redis.error_reply('WRONGTYPE lock key holds a hash with no expiry')
end
held = tonumber(held or '0')
if held == 0 then
    local holder = redis.call('hkeys', KEYS[1])[1] or ''
    if expected == 0 and string.sub(holder, 1, #ARGV[5]) == ARGV[5] then
        local earlier = tonumber(string.sub(holder, #ARGV[5] + 1))
        local this = tonumber(string.sub(ARGV[1], #ARGV[5] + 1))
        if earlier and this and earlier < this then
            redis.call('del', KEYS[1])
            return new_hold()
        end
    end
    return refused_by(pttl, holder)
end
if held ~= expected then
    return {3, held, ''}
end
redis.call('hincrby', KEYS[1], ARGV[1], 1)
if pttl < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
end
return {2, held + 1, ''}
