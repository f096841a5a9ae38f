"""Reading a traced holdfastd log, for the bench/*-steps.sh scripts."""
import datetime
import re


def ts(line):
    """The line's UTC timestamp in seconds, or None for an unstamped line."""
    m = re.match(r'(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d+)Z', line)
    if not m:
        return None
    t = datetime.datetime.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S').replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + float('0.' + m.group(2))


def stamped(path):
    """Every stamped line of the log at `path`, as (seconds, line)."""
    return [(ts(l), l) for l in open(path) if ts(l)]
