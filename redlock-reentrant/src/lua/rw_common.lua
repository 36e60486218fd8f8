-- Prepended (after lua/holders_read.lua or lua/holders_permit.lua, which name the holders'
-- kind) to every script that reads a hash of holders that each expire on their own: a
-- read-write lock's readers, a semaphore's permits.
-- The holders hash:
--   field = a hold (its owner and generation), value = '<count> <deadline>' (the hold count,
--   and when the holder's lease ends, in milliseconds of the server's clock), then for a
--   permit ' <weight>' (how many permits it holds);
--   '@' .. owner prefix = the generation of that owner's latest read hold here (its index);
--   '~' = KIND ('readers' or 'permits'), the hash's kind, so that another lock's hash under the
--   same key is refused at a glance (a reentrant lock named `{name}:read`).
-- Every reader has its own deadline: a crashed reader frees the lock within its own lease,
-- whatever other readers keep doing, and the hash's expiry is only a bound (at least the latest
-- deadline), never what keeps a reader. A reader's own requests touch its own fields only (in
-- constant time, however many read); the writer's path looks at every reader and purges the
-- ones whose deadline passed.
-- Mirrored by the model checker's read-write master (model/src/rw.rs), for readers: change
-- both (a permit's weight is not modelled there; the model-based test checks the semaphore).

local KIND_FIELD = '~'

-- The server's clock, in milliseconds.
local function now_ms()
    local now = redis.call('time')
    return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- A holder's entry: its count, deadline and weight (nil for a value that is not one; the
-- weight is nil for a reader).
local function parse_reader(value)
    local count, deadline, weight = string.match(value, '^(%d+) (%d+) ?(%d*)$')
    return tonumber(count), tonumber(deadline), tonumber(weight)
end

local function reader_value(count, deadline, weight)
    if weight then
        return string.format('%d %.0f %d', count, deadline, weight)
    end
    return string.format('%d %.0f', count, deadline)
end

-- A read hold's field, split: its owner's prefix (`{owner}:`) and its generation.
local function split_field(field)
    local prefix, generation = string.match(field, '^(.*:)(%d+)$')
    return prefix, generation
end

-- Why `key` cannot be a lock's hash (an error reply), or nil: a key of another type, or a hash
-- without an expiry (never one of ours). The writer's hash is checked so. Second: whether the
-- key exists.
local function not_writer(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then
        return nil, false
    end
    if kind ~= 'hash' then
        return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
    end
    if redis.call('pttl', key) < 0 then
        return redis.error_reply('WRONGTYPE lock key holds a hash with no expiry')
    end
    return nil, true
end

-- Why `key` cannot be a readers hash (an error reply), or nil: as `not_writer`, and another
-- lock's hash (a reentrant lock named `{name}:read`) is refused at a glance by the kind marker.
-- Never deleted or changed: refused.
local function not_readers(key)
    local wrong, exists = not_writer(key)
    if wrong then
        return wrong
    end
    if exists and redis.call('hget', key, KIND_FIELD) ~= KIND then
        return redis.error_reply('WRONGTYPE lock key holds a hash of another lock kind')
    end
    return nil
end

-- Why `key` cannot be the waiting writers' sorted set (an error reply), or nil.
local function not_waiting(key)
    local kind = redis.call('type', key)['ok']
    if kind ~= 'none' and kind ~= 'zset' then
        return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
    end
    return nil
end

-- Removes the read hold `field` (and its owner's index, if it names this hold). Returns
-- whether no reader's entry is left, and then deletes the hash: the last reader left.
local function drop_reader(key, field)
    redis.call('hdel', key, field)
    local prefix, generation = split_field(field)
    if prefix and redis.call('hget', key, '@' .. prefix) == generation then
        redis.call('hdel', key, '@' .. prefix)
    end
    -- What is left besides the kind (and a fixed count's record): readers (live or not purged
    -- yet) and their owners' indexes.
    local left = redis.call('hlen', key)
    if FIXED_FIELD then
        left = left - redis.call('hexists', key, FIXED_FIELD)
    end
    if left <= 1 then
        redis.call('del', key)
        return true
    end
    return false
end

-- `field`'s entry when it is live: its count, deadline and weight (0, 0 when it is not there);
-- an entry whose deadline passed is dropped.
local function reader_entry(key, field, now)
    local value = redis.call('hget', key, field)
    if not value then
        return 0, 0
    end
    local count, deadline, weight = parse_reader(value)
    if count and deadline > now then
        return count, deadline, weight
    end
    drop_reader(key, field)
    return 0, 0
end

-- Every reader (the writer's path and inspection): drops the readers whose deadline passed
-- (deleting the hash when none is left), and returns how many are live, the latest deadline
-- (0 with none), and `field`'s entry when it is live (its count, 0 when it is not there).
-- Call `not_readers` first.
local function live_readers(key, now, field)
    local entries = redis.call('hgetall', key)
    local live, latest, count = 0, 0, 0
    local expired = {}
    for i = 1, #entries, 2 do
        local name = entries[i]
        local first = string.sub(name, 1, 1)
        if first ~= '~' and first ~= '@' then
            local n, until_ms = parse_reader(entries[i + 1])
            if n and until_ms > now then
                live = live + 1
                latest = math.max(latest, until_ms)
                if name == field then
                    count = n
                end
            else
                expired[#expired + 1] = name
            end
        end
    end
    if live == 0 then
        if #entries > 0 then
            redis.call('del', key)
        end
    else
        for _, name in ipairs(expired) do
            drop_reader(key, name)
        end
    end
    return live, latest, count
end

-- Keeps the readers hash at least until `deadline` (never shortens it).
local function keep_readers_until(key, now, deadline)
    local left = deadline - now
    if redis.call('pttl', key) < left then
        redis.call('pexpire', key, left)
    end
end

-- The first writer still waiting (its heartbeat not run out) other than `prefix`'s, and how
-- long its heartbeat still runs; drops the ones whose heartbeat ran out.
local function waiting_writer(key, now, prefix)
    redis.call('zremrangebyscore', key, '-inf', now)
    local waiting = redis.call('zrangebyscore', key, '(' .. now, '+inf', 'WITHSCORES')
    for i = 1, #waiting, 2 do
        if waiting[i] ~= prefix then
            return waiting[i], tonumber(waiting[i + 1]) - now
        end
    end
    return nil, 0
end
