-- A count-down latch on one node (after lua/announce.lua). The latch is a hash (KEYS[1]):
-- '~' = 'latch' (its kind), 'gen' = the round's generation (a unique id, new at every arming),
-- 'count' = how many count-downs open it, 'ttl' = its lifetime in milliseconds; and a set of the
-- round's count-down ids (KEYS[2]): a count-down is an id added to the set, so a retried one
-- counts once. The round opens when the set has `count` ids: both keys are deleted (an unset
-- latch is open) and the opening is announced. Both keys expire `ttl` after the latest arming
-- or count-down. A count-down names its round's generation: one of an earlier round (late, or
-- retried after the latch opened and was armed again) never touches a later one.
-- A latch whose count its clients fix (on several masters) has one round, of generation
-- 'fixed' (never a generated one): a count-down arms it where it is not armed, and it is kept
-- once open (until it expires or is deleted), so that each master's set of ids stays what it
-- saw: a reader unites the sets of a majority, and a master that missed a count-down never
-- looks open or unset in its place.
-- ARGV[1]: 'arm' (ARGV[2] the count, ARGV[3] the generation, ARGV[6] the ttl: only if unset),
-- 'status', 'count-down' (ARGV[2] the id, ARGV[3] the round's generation), 'delete',
-- 'count-down-fixed' (ARGV[2] the id, ARGV[3] the fixed count, ARGV[6] the ttl, ARGV[7..] the
-- ids counted down elsewhere that the caller read: added too), 'ids' (as
-- 'status' but with the round's count in place of what is left, and the round's ids after the
-- reply's four fields).
-- ARGV[4]: the latch's channel. ARGV[5]: the message.
-- Returns {done (the arming, count-down or delete applied: 1, else 0; 2: a count-down-fixed
-- that found another round here, with its count), armed (0/1), how many count-downs are still
-- needed (0 when open; the count, for a done of 2), the round's generation ('' when open)}.
local KIND = 'latch'
local function wrong_type(key, kind)
    local found = redis.call('type', key)['ok']
    if found ~= 'none' and found ~= kind then
        return redis.error_reply('WRONGTYPE latch key holds a ' .. found .. ' value')
    end
    return nil
end
local wrong = wrong_type(KEYS[1], 'hash') or wrong_type(KEYS[2], 'set')
if wrong then
    return wrong
end
local latch = redis.call('hmget', KEYS[1], '~', 'gen', 'count', 'ttl')
if latch[1] == false and redis.call('exists', KEYS[1]) == 1 or latch[1] and latch[1] ~= KIND then
    return redis.error_reply('WRONGTYPE latch key holds a hash of another kind')
end
local op = ARGV[1]
local armed = latch[1] == KIND
local FIXED = 'fixed'
local function left()
    return math.max(0, tonumber(latch[3]) - redis.call('scard', KEYS[2]))
end
-- Adds the id ARGV[2] (and ARGV[from..], when `from` is given) to the round's set, keeps both
-- keys `ttl` more, and announces the opening where this count-down opened it (once: where the
-- set reaches the count); the reply (done: whether the set grew).
local function count_down(ttl, from)
    local before = redis.call('scard', KEYS[2])
    local added = redis.call('sadd', KEYS[2], ARGV[2])
    for i = from or (#ARGV + 1), #ARGV do
        added = added + redis.call('sadd', KEYS[2], ARGV[i])
    end
    added = math.min(added, 1)
    local remaining = left()
    if remaining == 0 and before < tonumber(latch[3]) then
        announce(ARGV[4], ARGV[5])
    end
    if remaining == 0 and latch[2] ~= FIXED then
        redis.call('del', KEYS[1], KEYS[2])
        return {added, 0, 0, ''}
    end
    redis.call('pexpire', KEYS[1], ttl)
    redis.call('pexpire', KEYS[2], ttl)
    return {added, 1, remaining, latch[2]}
end
if op == 'arm' then
    if armed then
        return {0, 1, left(), latch[2]}
    end
    redis.call('del', KEYS[2])
    redis.call('hset', KEYS[1], '~', KIND, 'gen', ARGV[3], 'count', ARGV[2], 'ttl', ARGV[6])
    redis.call('pexpire', KEYS[1], ARGV[6])
    return {1, 1, tonumber(ARGV[2]), ARGV[3]}
elseif op == 'status' then
    if not armed then
        return {0, 0, 0, ''}
    end
    return {0, 1, left(), latch[2]}
elseif op == 'count-down' then
    if not armed or latch[2] ~= ARGV[3] then
        return {0, 0, 0, ''} -- open, or another round: nothing of this round is left to count
    end
    return count_down(latch[4])
elseif op == 'count-down-fixed' then
    if not armed then
        redis.call('del', KEYS[2])
        redis.call('hset', KEYS[1], '~', KIND, 'gen', FIXED, 'count', ARGV[3], 'ttl', ARGV[6])
        latch = {KIND, FIXED, ARGV[3], ARGV[6]}
    elseif latch[2] ~= FIXED or latch[3] ~= ARGV[3] then
        return {2, 1, tonumber(latch[3]), latch[2]}
    end
    return count_down(ARGV[6], 7)
elseif op == 'ids' then
    if not armed then
        return {0, 0, 0, ''}
    end
    local reply = {0, 1, tonumber(latch[3]), latch[2]}
    for _, id in ipairs(redis.call('smembers', KEYS[2])) do
        reply[#reply + 1] = id
    end
    return reply
elseif op == 'delete' then
    local existed = redis.call('del', KEYS[1], KEYS[2])
    if existed > 0 then
        announce(ARGV[4], ARGV[5])
    end
    return {math.min(existed, 1), 0, 0, ''}
end
return redis.error_reply('ERR unknown latch operation')
