"""Closing on time: break, del, garbage collection, a with block, close()
and interpreter exit all stop the loader within about one __getitem__,
and no thread outlives it (or its pool); Ctrl-C while the loop waits in
next() raises KeyboardInterrupt at once. Signals and exits run in child
processes; their bounds are generous (seconds against a __getitem__ of
three), so they tell a loader that stops from one that does not."""
import gc
import os
import subprocess
import sys
import textwrap
import time

import pytest

import eachobs
from conftest import Samples, settle, task_count

EXECUTORS = ["threaded", "background", "serial"]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("how", ["break", "del", "with", "close", "gc"])
def test_no_thread_outlives_the_loader(how, executor):
    base = task_count()
    ds = Samples(10_000, "int", slow_s=0.0005)
    if how == "with":
        with eachobs.DataLoader(ds, batch_size=4, num_workers=4,
                                executor=executor) as loader:
            for i, b in enumerate(loader):
                if i == 3:
                    break
    else:
        loader = eachobs.DataLoader(ds, batch_size=4, num_workers=4,
                                    executor=executor)
        it = iter(loader)
        next(it)
        if how == "break":
            for i, b in enumerate(it):
                if i == 2:
                    break
            del it, b
        elif how == "del":
            del it, loader
        elif how == "close":
            loader.close()
        elif how == "gc":
            cycle = [it]
            cycle.append(cycle)
            del it, cycle, loader
            gc.collect()
    assert settle(base) == base, "loader threads still running"


def test_persistent_threads_end_with_the_loader():
    base = task_count()
    loader = eachobs.DataLoader(Samples(100, "int"), batch_size=4,
                                num_workers=3, persistent_workers=True)
    for _ in range(2):
        for b in loader:
            pass
    assert task_count() > base, "the pool's threads live between epochs"
    loader.close()
    assert settle(base) == base


CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    import eachobs

    # Python's own Ctrl-C handler, whatever the parent left: a shell
    # running the suite in the background starts it with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    class Slow:
        def __len__(self):
            return 1000
        def __getitem__(self, i):
            if i == 0:
                return 0        # the layout probe
            time.sleep(3)
            return i

    executor = sys.argv[1]
    loader = eachobs.DataLoader(Slow(), batch_size=2, num_workers=2,
                                executor=executor)
    it = iter(loader)
    print("ready", flush=True)
    t0 = time.monotonic()
    try:
        next(it)
    except KeyboardInterrupt:
        print("interrupted %.3f" % (time.monotonic() - t0), flush=True)
    if sys.argv[2] == "exit":
        sys.exit(0)  # left open: the exit closes it
    """)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_ctrl_c_in_next_raises_keyboard_interrupt_at_once(executor, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, str(script), executor, "exit"],
                         stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.3)  # let next() block; not a synchronization: any moment works
    sent = time.monotonic()
    p.send_signal(2)
    line = p.stdout.readline().strip()
    answered = time.monotonic() - sent
    assert line.startswith("interrupted"), line
    assert answered < 1.5, f"KeyboardInterrupt took {answered:.1f} s"
    # Exit closes the loader: it waits for the two sleeps in progress.
    assert p.wait(timeout=60) == 0


def test_interpreter_exit_closes_an_open_loader(tmp_path):
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent("""
        import time, eachobs
        class Slow:
            def __len__(self):
                return 10**6
            def __getitem__(self, i):
                time.sleep(0.05)
                return i
        loader = eachobs.DataLoader(Slow(), batch_size=4, num_workers=8)
        it = iter(loader)
        next(it)
        print("leaving", flush=True)
        """))
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, str(script)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "leaving" in out.stdout
    assert time.monotonic() - t0 < 30


def test_one_thread_at_a_time_may_iterate():
    import threading
    ds = Samples(100, "int", slow_s=0.5)
    loader = eachobs.DataLoader(ds, batch_size=2, num_workers=1,
                                executor="background")
    it = iter(loader)
    errors = []
    entered = threading.Event()

    def other():
        entered.set()
        try:
            next(it)
        except eachobs.LoaderError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    entered.wait()
    try:
        next(it)
    except eachobs.LoaderError as e:
        errors.append(e)
    t.join()
    # Whichever came second was refused; the first got its batch.
    assert len(errors) <= 1
    assert all("another thread" in str(e) or "closed" in str(e)
               for e in errors)
    loader.close()


def test_close_from_another_thread_ends_a_waiting_next():
    import threading
    base = task_count()
    ds = Samples(100, "int", slow_s=2.0)
    loader = eachobs.DataLoader(ds, batch_size=4, num_workers=2,
                                executor="background")
    it = iter(loader)
    got = []

    def consume():
        try:
            next(it)
            got.append("batch")
        except eachobs.LoaderError as e:
            got.append(str(e))

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.2)  # the consumer is (most likely) waiting in next()
    t0 = time.monotonic()
    loader.close()
    t.join(timeout=30)
    assert not t.is_alive()
    assert got and ("closed" in got[0] or got[0] == "batch"), got
    assert time.monotonic() - t0 < 10, "close waited for more than a getitem"
    assert settle(base) == base
