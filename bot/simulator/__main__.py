"""Run the video-service simulator: ``python -m bot.simulator --port 8080``.

Prints the base URL on stdout once listening (one line, so scripts can read it) and logs to stderr.
Stops cleanly on SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from bot.simulator.app import SimulatorConfig, VideoServiceSimulator

logger = logging.getLogger("bot.simulator")


def _budget(value: str) -> int | None:
    if value.strip().lower() in {"none", "null", "unlimited"}:
        return None
    try:
        budget = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer number of yen or 'none', got {value!r}") from None
    if budget < 0:
        raise argparse.ArgumentTypeError("max budget must be >= 0")
    return budget


def _rate(value: str) -> float:
    rate = float(value)
    if not 0.0 <= rate <= 1.0:
        raise argparse.ArgumentTypeError("fail rate must be within [0, 1]")
    return rate


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bot.simulator",
        description="Local text-to-video service simulator: same API as the real service, spends nothing.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8080, help="port, 0 for any free one (default: %(default)s)")
    parser.add_argument("--api-key", default="sim-key", help="the only accepted bearer key (default: %(default)s)")
    parser.add_argument(
        "--job-seconds", type=float, default=5.0, help="time for a job to complete (default: %(default)s)"
    )
    parser.add_argument(
        "--job-seconds-max",
        type=float,
        default=None,
        help="if set, job durations are uniform in [job-seconds, job-seconds-max]",
    )
    parser.add_argument(
        "--fail-rate", type=_rate, default=0.0, help="probability a job ends failed (default: %(default)s)"
    )
    parser.add_argument(
        "--max-budget",
        type=_budget,
        default=10_000,
        help="key budget in yen, or 'none' for no limit (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for durations and failures (default: 0)")
    parser.add_argument("--rate-limit", type=float, default=None, help="max requests per second across all endpoints")
    parser.add_argument("--video", type=Path, default=None, help="MP4 to serve (default: bundled sample)")
    parser.add_argument(
        "--echo-raw-key", action="store_true", help="report the raw key in /key/info instead of a masked one"
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default: %(default)s)")
    return parser


async def _serve(config: SimulatorConfig, host: str, port: int) -> None:
    simulator = VideoServiceSimulator(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Not available on Windows; Ctrl+C then surfaces as KeyboardInterrupt from asyncio.run().
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await simulator.start(host, port)
    print(simulator.base_url, flush=True)
    try:
        await stop.wait()
        logger.info("shutting down")
    finally:
        await simulator.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = SimulatorConfig(
            api_key=args.api_key,
            job_seconds=args.job_seconds,
            job_seconds_max=args.job_seconds_max,
            fail_rate=args.fail_rate,
            max_budget=args.max_budget,
            seed=args.seed,
            video_path=args.video,
            rate_limit_per_second=args.rate_limit,
            echo_raw_key=args.echo_raw_key,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.video is not None and not args.video.is_file():
        print(f"error: video file not found: {args.video}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(config, args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
