-- Prepended to acquire.lua for a reentrant lock (`RLock`): its hash is the whole lock.
local function refuse_new()
    return nil
end

local function on_new_hold()
end

local function refused_by(pttl, holder)
    return {0, pttl, holder}
end
