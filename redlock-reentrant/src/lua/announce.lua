-- Prepended to every script that announces a release, as standalone masters run it: waiters
-- subscribe to the lock's channel on every node (PUBLISH / SUBSCRIBE).
local function announce(channel, message)
    redis.call('publish', channel, message)
end
