"""Print the commits since a tag, one per line: short hash, author, subject."""

import subprocess
import sys

if __name__ == "__main__":
    since = sys.argv[1]
    log = subprocess.run(
        ["git", "log", "--no-merges", "--format=%h %an: %s", f"{since}..HEAD"],
        check=True,
        capture_output=True,
        text=True,
    )
    print(log.stdout, end="")
