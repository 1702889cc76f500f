"""Local simulator of the text-to-video service, for tests and spend-free dry runs."""

from bot.simulator.app import VideoServiceSimulator
from bot.simulator.config import (
    DEFAULT_FOREIGN_BASE_URL,
    DEFAULT_VIDEO_PATH,
    DownloadBody,
    ForeignPaths,
    SimModel,
    SimulatorConfig,
)
from bot.simulator.contract import (
    CREATE_PATH,
    KEY_INFO_PATH,
    MODEL_ID,
    STORAGE_PREFIX,
    Endpoint,
    service_masked_key,
)
from bot.simulator.jobs import JobStatus, SimJob

__all__ = [
    "CREATE_PATH",
    "DEFAULT_FOREIGN_BASE_URL",
    "DEFAULT_VIDEO_PATH",
    "KEY_INFO_PATH",
    "MODEL_ID",
    "STORAGE_PREFIX",
    "DownloadBody",
    "Endpoint",
    "ForeignPaths",
    "JobStatus",
    "SimJob",
    "SimModel",
    "SimulatorConfig",
    "VideoServiceSimulator",
    "service_masked_key",
]
