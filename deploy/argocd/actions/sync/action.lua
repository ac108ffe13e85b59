-- Argo CD action "sync" for usergroup.dev/UserGroup: asks the controller for one PUT of the group now.
--
-- Any new value of the usergroup.dev/sync-requested-at annotation (one that differs from
-- status.lastHandledSyncRequest) asks for one PUT of the spec, even when nothing changed, to put right a
-- group changed at the service behind the operator's back (docs/usergroup-reference.md, Sync on demand).
-- Written exactly as rotate/action.lua writes its annotation (Argo CD gives scripts no way to share
-- code): Argo CD sends the difference as a merge patch, this annotation and nothing else for any object
-- whose spec survives its JSON-to-Lua conversion (see deploy/argocd/README.md).
--
-- Runs in Argo CD's sandbox: Lua 5.1 (gopher-lua) with the base, table and package libraries only.
-- There is no global `os`; its safe part (time, date) comes from require("os"). No string or math library.

local os = require("os")
local SYNC = "usergroup.dev/sync-requested-at"

-- `argocd app actions run` runs an action even when discovery marked it disabled: refuse here too.
-- error(…, 0) keeps the message free of a script position; Argo CD shows it as the action's error.
if type(obj.spec) == "table" and obj.spec.suspend == true then
  error("not synced: spec.suspend is true, so the controller makes no call to the service; resume the UserGroup first", 0)
end
if type(obj.metadata) == "table" and obj.metadata.deletionTimestamp ~= nil then
  error("not synced: the UserGroup is being deleted", 0)
end

if type(obj.metadata) ~= "table" then
  obj.metadata = {}
end
if type(obj.metadata.annotations) ~= "table" then
  obj.metadata.annotations = {}
end

local current = obj.metadata.annotations[SYNC]
local handled = nil
if type(obj.status) == "table" then
  handled = obj.status.lastHandledSyncRequest
end

-- UTC with one-second resolution; a request within the same second as the pending or the last handled
-- one gets a counter suffix ("...Z-1"), one above the highest used this second, so every click is a new
-- value (see rotate/action.lua). Clicks the controller has not picked up yet coalesce into one PUT.
local stamp = os.date("!%Y-%m-%dT%H:%M:%SZ")
local function stamped(n)
  if n == 0 then
    return stamp
  end
  return stamp .. "-" .. n
end
local function used(value)
  return value == current or value == handled
end

local n = 0
for i = 0, 99 do
  if used(stamped(i)) then
    n = i + 1
  end
end
while used(stamped(n)) do
  n = n + 1
end

obj.metadata.annotations[SYNC] = stamped(n)
return obj
