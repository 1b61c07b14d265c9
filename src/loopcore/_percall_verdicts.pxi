# What does the policy answer for a scan the per-call path did not find quiet?
# (included by _percall_c.pyx after _Calls: ``verdict_of``'s out-of-line part,
# so that the quiet scan, inline at each caller, keeps a small frame.)


cdef object store_verdict(
    _Calls calls, object key, object tool_name, object args, uint64_t args_hash, bint append,
    object tool_call_id,
):
    """``verdict_of`` through the store's Python API (not the compiled ring)."""
    if append:
        stats = calls._store.scan_append(
            key, tool_name, args_hash, tool_call_id, calls._alarm, calls._unknown_alarm
        )
    else:
        stats = calls._store.scan(key, tool_name, args_hash, calls._alarm, calls._unknown_alarm)
    if stats is None:
        return None
    return calls._verdict(stats, tool_name, args, args_hash)


cdef object alarmed_verdict(
    _Calls calls, Scan *scan, object tool_name, object args, uint64_t args_hash
):
    """The policy's verdict on an alarmed scan of the compiled ring; ``RESCAN`` when a
    name it refers to moved meanwhile (another thread): the caller scans again."""
    if type(tool_name) is not str:  # its own __format__ may write the message
        stats = calls.ring.stats(scan)
        if stats is None:
            return RESCAN
        return calls._verdict(stats, tool_name, args, args_hash)
    cdef uint8_t known_poll = is_known_poll(tool_name, args) if (
        tool_name == "process" or tool_name == "command_status" or tool_name == "wait"
    ) else 0
    digest = scan_digest(scan, args_hash, known_poll)
    if calls.generation != calls.ring.generation:
        calls.verdicts.clear()
        calls.generation = calls.ring.generation
    verdict = calls.verdicts.get(digest)
    if verdict is None:
        stats = calls.ring.stats(scan)
        if stats is None:
            return RESCAN
        verdict = calls._verdict(stats, tool_name, args, args_hash)
        if len(calls.verdicts) >= VERDICT_CACHE_SIZE:
            calls.verdicts.clear()
        calls.verdicts[digest] = verdict
    return verdict
