#!/usr/bin/python3
"""Prints croniter's next fire times for the cron differential test.

Reads lines "<zone>\t<unix start>\t<count>\t<expression>" from the file named
by argv[1] and writes, per line, either the next <count> fire times after the
start as unix seconds separated by spaces, or "error". Sluice writes 6-field
expressions with seconds first; croniter wants seconds last, and has no "?"
(Sluice reads it as "*"), so both are rewritten here.
Exit status 3 when croniter is not installed (the test then skips).
"""
import datetime
import sys

try:
    from croniter import croniter
    from zoneinfo import ZoneInfo
except ImportError:
    sys.exit(3)


def to_croniter(expression):
    fields = expression.replace("?", "*").split()
    if len(fields) == 6:
        fields = fields[1:] + fields[:1]
    return " ".join(fields)


def main():
    out = []
    with open(sys.argv[1]) as cases:
        for line in cases:
            zone, start, count, expression = line.rstrip("\n").split("\t")
            tz = ZoneInfo(zone)
            at = datetime.datetime.fromtimestamp(int(start), tz)
            try:
                it = croniter(to_croniter(expression), at)
                times = [str(int(it.get_next(float))) for _ in range(int(count))]
                out.append(" ".join(times))
            except Exception:  # noqa: BLE001 - any croniter refusal counts
                out.append("error")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
