-- Argo CD action "rotate" for usergroup.dev/UserGroup: asks the controller to rotate the token.
--
-- Any new value of the usergroup.dev/rotate-requested-at annotation (one that differs from
-- status.rotation.lastHandledRequest) rotates the token exactly once. Argo CD diffs the returned
-- object against the live one and sends the difference as a merge patch: this annotation, and
-- nothing else for any object whose spec survives Argo CD's JSON-to-Lua conversion (see
-- deploy/argocd/README.md: a null inside spec.properties, or an empty object inside one of its
-- lists, does not).
--
-- Runs in Argo CD's sandbox: Lua 5.1 (gopher-lua) with the base, table and package libraries only.
-- There is no global `os`; its safe part (time, date) comes from require("os"), as in Argo CD's own
-- actions. No string or math library.

local os = require("os")
local ROTATE = "usergroup.dev/rotate-requested-at"

-- `argocd app actions run` runs an action even when discovery marked it disabled: refuse here too.
-- error(…, 0) keeps the message free of a script position; Argo CD shows it as the action's error.
if type(obj.spec) == "table" and obj.spec.suspend == true then
  error("not rotated: spec.suspend is true, so the controller makes no call to the service; resume the UserGroup first", 0)
end
if type(obj.metadata) == "table" and obj.metadata.deletionTimestamp ~= nil then
  error("not rotated: the UserGroup is being deleted", 0)
end

if type(obj.metadata) ~= "table" then
  obj.metadata = {}
end
if type(obj.metadata.annotations) ~= "table" then
  obj.metadata.annotations = {}
end

local current = obj.metadata.annotations[ROTATE]
local handled = nil
if type(obj.status) == "table" and type(obj.status.rotation) == "table" then
  handled = obj.status.rotation.lastHandledRequest
end

-- UTC, like Argo CD's own Deployment restart action ("%X" there; "%H:%M:%S" is the same and
-- portable). os.date has one-second resolution: a request within the same second as the pending
-- or the last handled one would repeat its value and be a no-op, so it gets a counter suffix
-- ("...Z-1", "...Z-2"), one above the highest used this second. Argo CD reads the object from the
-- cluster before running an action, so every click is a new value; clicks the controller has not
-- picked up yet coalesce into one rotation, which is what a rotation request means anyway.
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

obj.metadata.annotations[ROTATE] = stamped(n)
return obj
