"""What does each Redis step run on the server? (SPEC §10, §12.3: one atomic script a step)

A scope's ring is one Redis string in the native ring's row layout for
``historySize`` records (``_fleet_codec`` decodes it): eight columns, 49 bytes
a record, updated in place with ``SETRANGE``. Beside it a hash holds the
ring's head and fill, the scope's tool names (an index per name), the call id
of each slot, and the shared hook state: ``critical_seen`` (``x``), warning
buckets (``w…``), pending notes (``o…``) and the churn's liveness (``c``,
``co``). A session's set of runs lets ``end_session`` find them. All three keys
carry the session's hash tag, so they share a cluster slot.

The scripts only store, match and return records: the counts and the
verdicts are computed by the caller, with the same code as in-process. The
matching of an outcome to its call (SPEC §9.1 (a)-(d), §12.7, §8.1's veto
idempotence) is the one rule written here a second time, in Lua, because it
must run where the record is; the Redis state-machine test holds it to the
in-process ring.
"""

from __future__ import annotations

__all__ = [
    "ADMIT",
    "ATTACH",
    "CRITICAL",
    "DROP",
    "DROP_SESSION",
    "PUT_STATE",
    "READ",
    "RECONCILE",
    "RELEASE",
    "STATE",
    "WARN",
]

# KEYS: ring, meta, runs. ARGV[1..3]: historySize, TTL in ms, this run's member of ``runs``.
_PRELUDE = r"""
local ring_key, meta_key, runs_key = KEYS[1], KEYS[2], KEYS[3]
local H = tonumber(ARGV[1])
local TTL = tonumber(ARGV[2])
local RUN = ARGV[3]
local SIZE = 49 * H
local HAS_RESULT, HAS_UNKNOWN, HAS_CALL_ID = 1, 2, 4
local KIND_BITS, VETO, NO_PROGRESS, HAS_IDENTITY = 0x30, 0x10, 0x40, 0x80
local Z8 = string.rep('\0', 8)

local ring = redis.call('GET', ring_key)
local ring_existed = ring ~= false and ring ~= nil
if ring and #ring ~= SIZE then
  return redis.error_reply('LOOPCORE historySize: this scope is kept with '
    .. math.floor(#ring / 49) .. ' records, this guard keeps ' .. H)
end
local hf = redis.call('HMGET', meta_key, 'head', 'fill')
local head, fill = tonumber(hf[1]) or 0, tonumber(hf[2]) or 0
if not ring then fill = 0; head = 0 end

-- Every call renews the scope's keys; the session's set learns the run while
-- the scope has no ring yet (its first calls, or after end_run dropped it).
local function touch()
  redis.call('PEXPIRE', ring_key, TTL)
  redis.call('PEXPIRE', meta_key, TTL)
  if not ring_existed then redis.call('SADD', runs_key, RUN) end
  redis.call('PEXPIRE', runs_key, TTL)
end

local function sub(offset, n) return string.sub(ring, offset + 1, offset + n) end
local function flag_at(s) return string.byte(ring, 40 * H + s + 1) end
local function args_at(s) return sub(8 * s, 8) end
local function cid_at(s) return sub(16 * H + 8 * s, 8) end
local function tool_at(s) return sub(32 * H + 4 * s, 4) end
local function slot_of(i) return (head - fill + i) % H end
local function complete(f) return bit.band(f, HAS_RESULT) ~= 0 or bit.band(f, KIND_BITS) ~= 0 end
local function u32(n) return struct.pack('<I4', n) end

local function known_name(name)
  local i = redis.call('HGET', meta_key, 'T' .. name)
  if i then return u32(tonumber(i)) end
  return nil
end

local function name_index(name)
  local i = redis.call('HGET', meta_key, 'T' .. name)
  if i then return tonumber(i) end
  i = redis.call('HINCRBY', meta_key, 'tn', 1) - 1
  redis.call('HSET', meta_key, 'T' .. name, i, 't' .. i, name)
  return i
end

local function names()
  local n = tonumber(redis.call('HGET', meta_key, 'tn')) or 0
  if n == 0 then return {} end
  local fields = {}
  for i = 0, n - 1 do fields[#fields + 1] = 't' .. i end
  return redis.call('HMGET', meta_key, unpack(fields))
end

-- The record in slot s has this call id (its hash, then the id itself).
local function same_id(s, cid_hash, cid)
  if bit.band(flag_at(s), HAS_CALL_ID) == 0 or cid_at(s) ~= cid_hash then return false end
  return redis.call('HGET', meta_key, 'i' .. s) == cid
end

-- SPEC §9.1 (a)-(c): the pending record an outcome (args given) or a reconcile belongs to.
local function pending_match(tool4, args, cid_hash, cid)
  if not ring or not tool4 then return nil end
  local same, noid, other = nil, nil, false
  for i = fill - 1, 0, -1 do
    local s = slot_of(i)
    local f = flag_at(s)
    if not complete(f) then
      local mine = tool_at(s) == tool4 and (args == nil or args_at(s) == args)
      if cid and same_id(s, cid_hash, cid) then
        if mine then return s end
        other = true
      end
      if mine then
        same = same or s
        if bit.band(f, HAS_CALL_ID) == 0 then noid = noid or s end
      end
    end
  end
  if cid then
    if noid then return noid end
    if other then return nil end
  end
  return same
end

local function ensure_ring()
  if not ring then
    redis.call('SETRANGE', ring_key, SIZE - 1, '\0')
    ring = redis.call('GET', ring_key)
  end
end

local function put(s, args, result, cid_hash, ts, tool_i, unknown_i, flags, ident)
  redis.call('SETRANGE', ring_key, 8 * s, args)
  redis.call('SETRANGE', ring_key, 8 * H + 8 * s, result)
  redis.call('SETRANGE', ring_key, 16 * H + 8 * s, cid_hash)
  redis.call('SETRANGE', ring_key, 24 * H + 8 * s, ts)
  redis.call('SETRANGE', ring_key, 32 * H + 4 * s, u32(tool_i))
  redis.call('SETRANGE', ring_key, 36 * H + 4 * s, u32(unknown_i))
  redis.call('SETRANGE', ring_key, 40 * H + s, string.char(flags))
  redis.call('SETRANGE', ring_key, 41 * H + 8 * s, ident)
end

-- Appends a record at the head (the oldest falls out when full); its slot.
local function append(args, result, cid_hash, cid, ts, tool_i, unknown_i, flags, ident)
  ensure_ring()
  local s = head
  redis.call('HDEL', meta_key, 'i' .. s)
  put(s, args, result, cid_hash, ts, tool_i, unknown_i, flags, ident)
  if cid then redis.call('HSET', meta_key, 'i' .. s, cid) end
  head = (head + 1) % H
  if fill < H then fill = fill + 1 end
  redis.call('HSET', meta_key, 'head', head, 'fill', fill)
  return s
end

local function window()
  return {ring or '', head, fill, names()}
end
"""

# ARGV[4..]: tool, args hash, has id, id hash, id, timestamp, kind, want the window.
# Appends the call (pending, or a veto for kind 1); the window as it was before,
# and whether the scope is churning.
ADMIT = (
    _PRELUDE
    + r"""
local before = ARGV[11] == '1' and window() or {'', 0, 0, {}}
local cid = ARGV[6] == '1' and ARGV[8] or nil
local kind = tonumber(ARGV[10])
append(ARGV[5], Z8, cid and ARGV[7] or Z8, cid, ARGV[9], name_index(ARGV[4]), 0,
  (cid and HAS_CALL_ID or 0) + kind * 16, Z8)
touch()
before[5] = redis.call('HEXISTS', meta_key, 'c')
return before
"""
)

# ARGV[4..]: tool, args hash, has id, id hash, id, timestamp, veto.
# A critical: the admitted call becomes a veto (appended if it fell out meanwhile),
# and critical_seen is tested and set; its prior value (terminal when 1).
CRITICAL = (
    _PRELUDE
    + r"""
if ARGV[10] == '1' then
  local cid = ARGV[6] == '1' and ARGV[8] or nil
  local s = pending_match(known_name(ARGV[4]), ARGV[5], ARGV[7], cid)
  if s and bit.band(flag_at(s), KIND_BITS) == 0 then
    redis.call('SETRANGE', ring_key, 40 * H + s, string.char(bit.bor(flag_at(s), VETO)))
  else
    append(ARGV[5], Z8, cid and ARGV[7] or Z8, cid, ARGV[9], name_index(ARGV[4]), 0,
      (cid and HAS_CALL_ID or 0) + VETO, Z8)
  end
end
local prior = redis.call('HGET', meta_key, 'x')
redis.call('HSET', meta_key, 'x', '1')
-- A second critical ends the run: its run-loop cutoffs stop counting (SPEC §12.13).
if prior == '1' and ARGV[10] == '1' then redis.call('HSET', meta_key, 'st', '1') end
touch()
return prior == '1' and 1 or 0
"""
)

# ARGV[4..]: warning key, its multiple (0: none), note field, note value ('' none),
# liveness (1 churning, 0 not, -1 not observed), now (wall clock).
# A warning's bucket (shown only when it reaches a new multiple), its note for the
# call, and one liveness observation: {shown, churn change (1 started, -1 ended)}.
WARN = (
    _PRELUDE
    + r"""
local multiple = tonumber(ARGV[5])
local emitted = 0
if multiple > 0 then
  local shown = tonumber(redis.call('HGET', meta_key, 'w' .. ARGV[4])) or 0
  if multiple > shown then
    redis.call('HSET', meta_key, 'w' .. ARGV[4], multiple)
    emitted = 1
    if ARGV[7] ~= '' then redis.call('HSET', meta_key, ARGV[6], ARGV[7]) end
  end
end
local live, change = tonumber(ARGV[8]), 0
if live == 1 then
  if redis.call('HSETNX', meta_key, 'c', ARGV[9]) == 1 then change = 1
  else redis.call('HSET', meta_key, 'co', ARGV[9]) end
elseif live == 0 and redis.call('HDEL', meta_key, 'c') == 1 then
  redis.call('HDEL', meta_key, 'co')
  change = -1
end
touch()
return {emitted, change}
"""
)

# ARGV[4..]: tool, args hash, has id, id hash, id, timestamp, result hash ('' none),
# unknown tool name ('' none, with has-unknown), has unknown, kind, identity ('' none),
# no progress, pop the note, note field.
# SPEC §9.1/§12.7: completes the pending record of this call, or appends one; a
# repeated outcome (or veto) of an id returns its record unchanged. Returns the
# record's slot fields and the note pending for it (removed), if asked.
ATTACH = (
    _PRELUDE
    + r"""
local cid = ARGV[6] == '1' and ARGV[8] or nil
local kind = tonumber(ARGV[13])
local tool4 = known_name(ARGV[4])
local found = nil
if cid and ring then
  for i = fill - 1, 0, -1 do
    local s = slot_of(i)
    local f = flag_at(s)
    if complete(f) and same_id(s, ARGV[7], cid) then
      local k = bit.band(f, KIND_BITS)
      if kind == 1 then
        if k == VETO then found = s; break end
      elseif tool_at(s) == tool4 and args_at(s) == ARGV[5] and k ~= VETO then
        found = s; break
      end
    end
  end
end
if not found then
  local flags = kind * 16
  if ARGV[10] ~= '' then flags = flags + HAS_RESULT end
  if ARGV[12] == '1' then flags = flags + HAS_UNKNOWN end
  if ARGV[14] ~= '' then flags = flags + HAS_IDENTITY end
  if ARGV[15] == '1' then flags = flags + NO_PROGRESS end
  local unknown_i = ARGV[12] == '1' and name_index(ARGV[11]) or 0
  local result = ARGV[10] ~= '' and ARGV[10] or Z8
  local ident = ARGV[14] ~= '' and ARGV[14] or Z8
  local s = pending_match(tool4, ARGV[5], ARGV[7], cid)
  if not s then
    found = append(ARGV[5], result, cid and ARGV[7] or Z8, cid, ARGV[9], name_index(ARGV[4]),
      unknown_i, flags + (cid and HAS_CALL_ID or 0), ident)
  else
    local had = bit.band(flag_at(s), HAS_CALL_ID)
    if cid and had == 0 then
      redis.call('SETRANGE', ring_key, 16 * H + 8 * s, ARGV[7])
      redis.call('HSET', meta_key, 'i' .. s, cid)
      had = HAS_CALL_ID
    end
    redis.call('SETRANGE', ring_key, 8 * H + 8 * s, result)
    redis.call('SETRANGE', ring_key, 36 * H + 4 * s, u32(unknown_i))
    redis.call('SETRANGE', ring_key, 41 * H + 8 * s, ident)
    redis.call('SETRANGE', ring_key, 40 * H + s, string.char(flags + had))
    found = s
  end
  ring = redis.call('GET', ring_key)
end
local record_cid = bit.band(flag_at(found), HAS_CALL_ID) ~= 0
  and redis.call('HGET', meta_key, 'i' .. found) or false
local note = false
if ARGV[16] == '1' then
  local held = redis.call('HGET', meta_key, ARGV[17])
  if held then
    local colon = string.find(held, ':', 2, true)
    local n = tonumber(string.sub(held, 2, colon - 1))
    local owner = string.sub(held, colon + 1, colon + n)
    if string.sub(held, 1, 1) == '0' or (record_cid and record_cid == owner) then
      redis.call('HDEL', meta_key, ARGV[17])
      note = string.sub(held, colon + n + 1)
    end
  end
end
touch()
local f = flag_at(found)
local unknown = false
if bit.band(f, HAS_UNKNOWN) ~= 0 then
  unknown = redis.call('HGET', meta_key, 't' .. struct.unpack('<I4', sub(36 * H + 4 * found, 4)))
end
local tool = redis.call('HGET', meta_key, 't' .. struct.unpack('<I4', tool_at(found)))
local guard = redis.call('HMGET', meta_key, 'g', 'vg')
return {tool, args_at(found), record_cid, sub(24 * H + 8 * found, 8), sub(8 * H + 8 * found, 8),
  unknown, f, sub(41 * H + 8 * found, 8), note, guard[1], guard[2] or '0'}
"""
)

# ARGV[4..]: tool, args hash, has id, id hash, id. SPEC §8.7: re-hashes the pending
# call a pre-call hook rewrote; {found, changed, its position, the window after}.
RECONCILE = (
    _PRELUDE
    + r"""
local cid = ARGV[6] == '1' and ARGV[8] or nil
local s = pending_match(known_name(ARGV[4]), nil, ARGV[7], cid)
if not s then return {0} end
local changed = args_at(s) ~= ARGV[5] and 1 or 0
redis.call('SETRANGE', ring_key, 8 * s, ARGV[5])
ring = redis.call('GET', ring_key)
touch()
return {1, changed, (s - head + fill) % H, window()}
"""
)

# ARGV[4..]: the call ids. Removes the pending records of these ids and their notes;
# how many records went. The records after the first removed one move down in
# place (SETRANGE slot by slot): the ring is never rewritten whole.
RELEASE = (
    _PRELUDE
    + r"""
if not ring then return 0 end
local ids = {}
for i = 4, #ARGV do ids[ARGV[i]] = true end
local widths = {8, 8, 8, 8, 4, 4, 1, 8}
local starts = {0, 8 * H, 16 * H, 24 * H, 32 * H, 36 * H, 40 * H, 41 * H}
local kept, first = {}, nil
for i = 0, fill - 1 do
  local s = slot_of(i)
  local cid = bit.band(flag_at(s), HAS_CALL_ID) ~= 0 and redis.call('HGET', meta_key, 'i' .. s)
  if not complete(flag_at(s)) and cid and ids[cid] then
    first = first or i
  else
    kept[#kept + 1] = {s, cid}
  end
end
if not first then return 0 end
local removed = fill - #kept
for i = first, #kept - 1 do
  local from, to = kept[i + 1][1], slot_of(i)
  for c = 1, 8 do
    local w = widths[c]
    redis.call('SETRANGE', ring_key, starts[c] + w * to, sub(starts[c] + w * from, w))
  end
  if kept[i + 1][2] then redis.call('HSET', meta_key, 'i' .. to, kept[i + 1][2])
  else redis.call('HDEL', meta_key, 'i' .. to) end
end
for i = #kept, fill - 1 do
  local s = slot_of(i)
  redis.call('SETRANGE', ring_key, 40 * H + s, '\0')
  redis.call('HDEL', meta_key, 'i' .. s)
end
head = (head - removed) % H
fill = #kept
redis.call('HSET', meta_key, 'head', head, 'fill', fill)
local all = redis.call('HGETALL', meta_key)
for i = 1, #all, 2 do
  local field, held = all[i], all[i + 1]
  if string.sub(field, 1, 1) == 'o' and string.sub(held, 1, 1) == '1' then
    local colon = string.find(held, ':', 2, true)
    local owner = string.sub(held, colon + 1, colon + tonumber(string.sub(held, 2, colon - 1)))
    if ids[owner] then redis.call('HDEL', meta_key, field) end
  end
end
touch()
return removed
"""
)

# ARGV[4]: '1' for the call ids too, ARGV[5]: '1' for the liveness fields.
# The window (and the id of each record, oldest first); a read keeps the scope alive.
READ = (
    _PRELUDE
    + r"""
local out = window()
local ids = {}
if ARGV[4] == '1' then
  for i = 0, fill - 1 do
    local s = slot_of(i)
    ids[#ids + 1] = bit.band(flag_at(s), HAS_CALL_ID) ~= 0
      and redis.call('HGET', meta_key, 'i' .. s) or false
  end
end
out[5] = ids
if ARGV[5] == '1' then out[6] = redis.call('HMGET', meta_key, 'c', 'co') end
if ring then touch() end
return out
"""
)

# Forgets one scope: {1 if it held anything, its post-compaction guard's state}.
DROP = r"""
local guard = redis.call('HGET', KEYS[2], 'g')
local gone = redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[3])
return {gone > 0 and 1 or 0, guard}
"""

# ARGV[4]: the state's field ('g' the post-compaction guard, 'l' the run loop).
# {its document or nil, its version, whether the run was stopped (SPEC §12.13)}.
STATE = (
    _PRELUDE
    + r"""
local got = redis.call('HMGET', meta_key, ARGV[4], 'v' .. ARGV[4], 'st')
touch()
return {got[1], got[2] or '0', got[3] or '0'}
"""
)

# ARGV[4..6]: field, the version it was read at, the new document ('' removes it).
# Written only if no one wrote it since: {1}, else {0, its document, its version}.
PUT_STATE = (
    _PRELUDE
    + r"""
local version = redis.call('HGET', meta_key, 'v' .. ARGV[4]) or '0'
if version ~= ARGV[5] then
  return {0, redis.call('HGET', meta_key, ARGV[4]), version}
end
if ARGV[6] == '' then redis.call('HDEL', meta_key, ARGV[4])
else redis.call('HSET', meta_key, ARGV[4], ARGV[6]) end
redis.call('HINCRBY', meta_key, 'v' .. ARGV[4], 1)
touch()
return {1}
"""
)

# KEYS[1]: the session's runs; ARGV[1]: the prefix of its keys (ring and meta add
# 'r:' / 'm:' and the run). Forgets every run of the session; how many.
DROP_SESSION = r"""
local runs = redis.call('SMEMBERS', KEYS[1])
local n = 0
for _, run in ipairs(runs) do
  if redis.call('DEL', ARGV[1] .. 'r:' .. run, ARGV[1] .. 'm:' .. run) > 0 then n = n + 1 end
end
redis.call('DEL', KEYS[1])
return n
"""
