"""
Command line for a run's label folder::

    python -m sb3_pref.human export RUN_DIR labels.npz   # answered pairs -> .npz preference dataset
    python -m sb3_pref.human serve RUN_DIR               # answer pending queries without a training process
    python -m sb3_pref.human summary RUN_DIR             # counts and agreement
"""

import argparse
import os
import time
from typing import Any

from sb3_pref.human.progress import CURVES_META, serve_command
from sb3_pref.human.server import FeedbackServer
from sb3_pref.human.store import LabelStore


def _store(run_dir: str) -> LabelStore:
    path = os.path.join(run_dir, "labels.sqlite")
    if not os.path.exists(path):
        raise SystemExit(f"{path} does not exist: give the run_dir of a HumanTeacher")
    return LabelStore(path)


def serve_status(store: LabelStore, run_dir: str) -> dict[str, Any]:
    """What the page says in ``serve`` mode: no training process, and the last result and curves the run stored."""
    progress = store.get_meta("progress", {})
    return {
        "training": "none",
        "mode": "serve",
        "progress": progress,
        "curves": store.get_meta(CURVES_META, []),
        "final": store.get_meta("final"),
        "finished_before": bool(progress.get("done")),
        "resume": {"command": "", "serve": serve_command(run_dir)},
    }


def _share(agree: float, n: float) -> str:
    return f"{agree:.0f} of {n:.0f} pairs ({agree / n:.0%})"


def summary_text(store: LabelStore) -> str:
    """:return: the counts and agreements of a run folder as a few lines a person reads (no ``nan``)"""
    counts = store.counts()
    asked, answered, skipped, pending = (counts[key] for key in ("queries", "answered", "skipped", "pending"))
    lines = [f"pairs asked: {asked}; answered: {answered} (of them {skipped} can't tell); waiting: {pending}"]
    scripted = store.agreement()
    lines.append(
        f"agreement with the scripted teacher: {_share(scripted['agree'], scripted['n'])}"
        if scripted["n"]
        else "agreement with the scripted teacher: no pair to compare (no MixedTeacher, or none answered yet)"
    )
    people = store.people_agreement()
    lines.append(
        f"agreement between people: {_share(people['agree'], people['n'])} judged twice, {people['people']:.0f} people"
        if people["n"]
        else f"agreement between people: no pair judged twice yet (names given: {people['people']:.0f})"
    )
    by_person = sorted(store.labellers().items(), key=lambda item: (-item[1], item[0]))
    answers = ", ".join(f"{name or '(no name)'} {count}" for name, count in by_person)
    lines.append(f"answers by person: {answers or 'none yet'}")
    return "\n".join(lines)


def serve(run_dir: str, host: str = "127.0.0.1", port: int = 0) -> FeedbackServer:
    """The labelling page of a stopped run: its pending queries, its instruction, and no training claimed."""
    store = _store(run_dir)
    return FeedbackServer(
        store,
        os.path.join(run_dir, "clips"),
        host=host,
        port=port,
        status=lambda: serve_status(store, run_dir),
        instruction=store.get_meta("instruction", ""),
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sb3_pref.human", description=__doc__.split("::")[0].strip())
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write the answered pairs to a .npz preference dataset")
    export.add_argument("run_dir")
    export.add_argument("output")
    # Not named "serve": that would shadow serve() below and the command would call the parser.
    serve_command = commands.add_parser("serve", help="serve the labelling page for the pending queries of a run")
    serve_command.add_argument("run_dir")
    serve_command.add_argument("--host", default="127.0.0.1")
    serve_command.add_argument("--port", type=int, default=0)
    summary = commands.add_parser("summary", help="print answer counts and agreement")
    summary.add_argument("run_dir")
    args = parser.parse_args()

    store = _store(args.run_dir)
    if args.command == "export":
        print(f"wrote {store.export_npz(args.output)} labelled pairs to {args.output}")
    elif args.command == "summary":
        print(summary_text(store))
    else:
        store.close()
        server = serve(args.run_dir, host=args.host, port=args.port)
        print(f"label the pending queries at {server.url}  (Ctrl+C to stop; answers join the run when it resumes)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.close()


if __name__ == "__main__":
    main()
