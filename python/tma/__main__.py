"""``python -m tma train [--option value ...]``: :func:`tma.train` from a shell, e.g. one rank
of an MPI job::

    mpirun -np 5 python -m tma train --partitions parts --engine mpi --time-limit 60s

Every ``--name value`` (or ``--name=value``) is passed to :func:`tma.train` as ``name=value``
(dashes become underscores, so ``--time-limit 60s`` is ``time_limit="60s"``); values that read
as integers, numbers or ``true``/``false`` are passed as such. ``--dataset DIR`` is the
dataset, ``--partitions DIR`` a partition directory, ``--out DIR`` the run directory,
``--resume RUN_DIR`` continues an interrupted run (:func:`tma.resume`). An
unknown option is an error naming it (exit status 2). Rank 0 (or an in-process run) prints the
result and the run directory; a trainer rank prints nothing.
"""

import sys
from typing import Any, Dict, List, Optional

USAGE = "usage: python -m tma train [--dataset DIR | --partitions DIR | --resume RUN_DIR] [--engine in-process|mpi] [--OPTION VALUE ...]"


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse(argv: List[str]) -> Dict[str, Any]:
    """The keyword arguments of :func:`tma.train` that ``argv`` (after ``train``) gives."""
    opts: Dict[str, Any] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--") or len(a) == 2:
            raise ValueError(f"'{a}': expected --OPTION VALUE")
        key = a[2:]
        if "=" in key:
            key, val = key.split("=", 1)
        else:
            if i + 1 >= len(argv):
                raise ValueError(f"--{key}: a value is missing")
            i += 1
            val = argv[i]
        name = key.replace("-", "_")
        if name in opts:
            raise ValueError(f"--{key} is given twice")
        keep = ("dataset", "partitions", "out", "resume", "tensorboard", "engine", "fail", "fanouts", "eval_fanouts")
        opts[name] = val if name in keep else _value(val)
        i += 1
    return opts


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] != "train":
        print(f"error: unknown command '{argv[0]}'\n{USAGE}", file=sys.stderr)
        return 2
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(USAGE)
        print("options: the keyword arguments of tma.train, as --name value; tma.option_names() lists them")
        return 0
    import tma

    try:
        opts = parse(argv[1:])
        dataset = opts.pop("dataset", None)
        resume = opts.pop("resume", None)
        if resume is not None:
            # as `tma train --resume RUN_DIR`: continue that run (under mpirun with --engine mpi)
            run = tma.resume(resume, dataset=dataset, **opts)
        else:
            run = tma.train(dataset, **opts)
    except ValueError as e:  # bad options or input: as `tma train`, status 2
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as e:  # files, the run itself
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"{e}", file=sys.stderr)
        return 130
    if run is None:  # an MPI trainer rank
        return 0
    s = run.summary
    print(
        f"done: {s['rounds']} rounds in {s['train_time_s']:.1f}s; "
        f"best (round {s['best_round']}) val {s['metric']}={s['best_val']['value']:.4f} "
        f"test={s['best_test']['value']:.4f}"
    )
    print(f"run directory: {run.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
