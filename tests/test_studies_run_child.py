"""``studies.pages.run_child``: a driver's child process runs to its end, and a Ctrl-C to the driver lets the
child save and stop before the driver ends with status 130."""

import signal
import sys
import threading
import time

import pytest

from studies.pages import run_child

# a stand-in for a training: on SIGTERM it writes its save, then exits as the trainer does (130)
CHILD = """
import signal, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
def stop(signum, frame):
    time.sleep(0.5)  # saving takes a moment
    (out / "saved").write_text("saved")
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the trainer holds Ctrl-C until its save
(out / "ready").write_text("ready")
time.sleep(60)
(out / "finished").write_text("finished")
"""


def test_a_child_that_ends_well_returns_and_one_that_fails_ends_the_driver_in_one_line(capsys):
    run_child([sys.executable, "-c", "pass"])
    with pytest.raises(SystemExit) as failed:  # a child stopped by SIGTERM alone: its status, and no traceback
        run_child([sys.executable, "-c", "raise SystemExit(3)"])
    assert failed.value.code == 3
    assert capsys.readouterr().err == f"stopped: {sys.executable} -c 'raise SystemExit(3)' ended with exit status 3\n"


def test_ctrl_c_to_the_driver_lets_the_child_save_then_ends_the_driver_with_130(tmp_path, capsys):
    def ctrl_c_once_the_child_is_ready():
        while not (tmp_path / "ready").exists():
            time.sleep(0.05)
        signal.raise_signal(signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    threading.Thread(target=ctrl_c_once_the_child_is_ready, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        run_child([sys.executable, "-c", CHILD, str(tmp_path)])
    assert stopped.value.code == 130 and time.monotonic() - start < 30
    assert (tmp_path / "saved").read_text() == "saved" and not (tmp_path / "finished").exists()
    assert capsys.readouterr().err.strip() == (
        "interrupted: its run stopped (exit status 130); the same command continues"
    )
    assert signal.getsignal(signal.SIGINT) is before
