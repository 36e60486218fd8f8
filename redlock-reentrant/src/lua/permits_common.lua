-- Prepended (after lua/holders_permit.lua and lua/rw_common.lua) to a semaphore's scripts that
-- read its count of permits or every permit out.
-- A semaphore on a node: its permits hash (lua/rw_common.lua: one field per permit out, whose
-- value is '1 <deadline> <weight>'), and its count of permits, a string key holding how many
-- permits the semaphore has (absent: none). The count is configuration and has no expiry; the
-- permits hash lives until its latest permit's deadline. Permits out beyond the count (after the
-- count was lowered) stay until released or expired; no new one is granted meanwhile.

-- Why `key` cannot be a count of permits (an error reply), or nil; then the count (0 when
-- unset).
local function permits_of(key)
    local value = redis.pcall('get', key)
    if type(value) == 'table' then
        local kind = redis.call('type', key)['ok']
        return redis.error_reply('WRONGTYPE semaphore key holds a ' .. kind .. ' value')
    end
    if not value then
        return nil, 0
    end
    local count = string.match(value, '^%d+$') and tonumber(value)
    if not count then
        return redis.error_reply('WRONGTYPE semaphore key holds a string that is not a count')
    end
    return nil, count
end

-- Why the semaphore's keys cannot be a semaphore's (an error reply), or nil; then its count.
local function not_semaphore(holders, count_key)
    local wrong = not_readers(holders)
    if wrong then
        return wrong
    end
    return permits_of(count_key)
end

-- Every permit out (call `not_readers` first): drops the ones whose deadline passed, and
-- returns how many permits are out and the earliest deadline among them (nil with none).
local function permits_out(key, now)
    local entries = redis.call('hgetall', key)
    local out, earliest = 0, nil
    local expired = {}
    for i = 1, #entries, 2 do
        local name = entries[i]
        local first = string.sub(name, 1, 1)
        if first ~= '~' and first ~= '@' then
            local _, until_ms, weight = parse_reader(entries[i + 1])
            if until_ms and until_ms > now then
                out = out + (weight or 1)
                if not earliest or until_ms < earliest then
                    earliest = until_ms
                end
            else
                expired[#expired + 1] = name
            end
        end
    end
    for _, name in ipairs(expired) do
        drop_reader(key, name)
    end
    return out, earliest
end
