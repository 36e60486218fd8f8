-- Prepended to lua/rw_common.lua for a read-write lock's readers hash: its kind marker, and
-- which departures are announced (the last reader's: a writer may wait for the lock to empty).
local KIND = 'readers'

local function departed(emptied)
    return emptied
end

-- Readers record no fixed count (see lua/holders_permit.lua).
local FIXED_FIELD = false
