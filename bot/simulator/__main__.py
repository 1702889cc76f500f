"""Run the video-service simulator: ``python -m bot.simulator --port 8080``.

Prints the base URL on stdout once listening (one line, so scripts can read it) and logs to stderr.
Stops cleanly on SIGINT / SIGTERM.

More models: ``--model ID,CREATE_PATH,PRICE[,no-seed]`` (repeatable) serves another model at its own
create path and flat price, beside the spec's model (priced by ``--price``).

The misbehaviour flags (``--download-body``, ``--foreign-paths``, ``--oversize-bytes`` ...) map to the
``SimulatorConfig`` fields of the same meaning; ``bot.simulator.config`` documents them all.
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

from bot.simulator.app import VideoServiceSimulator
from bot.simulator.config import DOWNLOAD_BODIES, FOREIGN_PATHS, SimModel, SimulatorConfig
from bot.simulator.contract import DEFAULT_PRICE_YEN

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


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("expected an integer >= 1")
    return number


def _model(value: str) -> SimModel:
    """`ID,CREATE_PATH,PRICE[,no-seed]` (model ids hold slashes, so commas separate the parts)."""
    parts = [part.strip() for part in value.split(",")]
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "no-seed"):
        raise argparse.ArgumentTypeError(f"expected ID,CREATE_PATH,PRICE[,no-seed], got {value!r}")
    try:
        price = int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"the price must be a whole number of yen, got {parts[2]!r}") from None
    return SimModel(id=parts[0], create_path=parts[1], price_yen=price, supports_seed=len(parts) == 3)


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
    parser.add_argument("--price", type=_positive_int, default=DEFAULT_PRICE_YEN,
                        help="flat price in yen of the spec's model (default: %(default)s)")
    parser.add_argument(
        "--model", dest="models", action="append", type=_model, default=[], metavar="ID,CREATE_PATH,PRICE[,no-seed]",
        help="serve another model at its own create path and price; repeat for more",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for durations and failures (default: 0)")
    parser.add_argument("--rate-limit", type=float, default=None, help="max requests per second across all endpoints")
    parser.add_argument("--video", type=Path, default=None, help="MP4 to serve (default: bundled sample)")
    parser.add_argument(
        "--echo-raw-key", action="store_true", help="report the raw key in /key/info instead of a masked one"
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default: %(default)s)")

    bad = parser.add_argument_group("misbehaviours", "make the service misbehave (all off by default)")
    bad.add_argument(
        "--job-id",
        dest="job_ids",
        action="append",
        default=[],
        metavar="ID",
        help="the next accepted create gets exactly this id; repeat for the following ones",
    )
    bad.add_argument(
        "--duplicate-job-ids", action="store_true", help="every accepted create reuses the most recent job's id"
    )
    bad.add_argument("--foreign-paths", choices=FOREIGN_PATHS, default=None, help="poll/content paths point elsewhere")
    bad.add_argument("--foreign-base-url", default=None, help="other host for --foreign-paths absolute")
    bad.add_argument("--download-body", choices=DOWNLOAD_BODIES, default=None, help="serve this instead of the MP4")
    bad.add_argument(
        "--oversize-bytes", type=_positive_int, default=None, help="serve an MP4 start padded to this many bytes"
    )
    bad.add_argument(
        "--no-content-length", action="store_true", help="send download bodies chunked, without Content-Length"
    )
    bad.add_argument("--download-rate", type=float, default=None, help="trickle download bodies at this many bytes/s")
    bad.add_argument("--create-body", default=None, help="raw text an accepted (charged) create answers with, as JSON")
    bad.add_argument("--key-info-body", default=None, help="raw text that /key/info serves as JSON, verbatim")
    bad.add_argument("--download-redirect", default=None, help="base URL that downloads redirect to (302)")
    bad.add_argument(
        "--status-redirect", action="store_true", help="status also redirects (302) to --download-redirect's base"
    )
    return parser


def config_from_args(args: argparse.Namespace) -> SimulatorConfig:
    """The config the parsed arguments ask for; ValueError if the combination is invalid."""
    foreign_base = {} if args.foreign_base_url is None else {"foreign_base_url": args.foreign_base_url}
    return SimulatorConfig(
        api_key=args.api_key,
        job_seconds=args.job_seconds,
        job_seconds_max=args.job_seconds_max,
        fail_rate=args.fail_rate,
        max_budget=args.max_budget,
        price_yen=args.price,
        extra_models=tuple(args.models),
        seed=args.seed,
        video_path=args.video,
        rate_limit_per_second=args.rate_limit,
        echo_raw_key=args.echo_raw_key,
        forced_job_ids=tuple(args.job_ids),
        duplicate_job_ids=args.duplicate_job_ids,
        foreign_paths=args.foreign_paths,
        download_body=args.download_body,
        download_oversize_bytes=args.oversize_bytes,
        download_send_length=not args.no_content_length,
        download_bytes_per_second=args.download_rate,
        create_raw_body=args.create_body,
        key_info_raw_body=args.key_info_body,
        download_redirect=args.download_redirect,
        status_redirect=args.status_redirect,
        **foreign_base,
    )


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
        config = config_from_args(args)
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
