"""A second model at another price, through the real bot process, the Discord double and the simulator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.simulator import MODEL_ID, SimModel
from bot.store.jobs import JobState, JobStore
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import BotProcess
from tests.e2e.test_video_flow import embed_text, original, wait_until
from tests.frontend.test_command_schema import TWO_MODELS

PRO_ID = "provider/video-model-2.0-pro"
PRO = SimModel(id=PRO_ID, create_path="/gateway/videos/create-pro", price_yen=1_200, supports_seed=False)


def posted_video(message: dict[str, Any]) -> bool:
    return bool(message.get("attachments_data"))


async def test_a_second_model_is_charged_shown_and_recorded_at_its_own_price(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble, tmp_path: Path
) -> None:
    service = await make_service(extra_models=(PRO,))
    models = tmp_path / "models.toml"
    models.write_text(TWO_MODELS, encoding="utf-8")
    bot = make_bot(service, MODELS_FILE=str(models))
    await bot.start()
    channel = double.channel_ids[0]

    # Discord shows /video with a model choice, each with its price, and no single price in the description.
    [video] = [c for c in double.synced_commands[double.guild_id] if c["name"] == "video"]
    [model_option] = [o for o in video["options"] if o["name"] == "model"]
    assert [c["name"] for c in model_option["choices"]] == ["Video 2.0 Fast · ¥250", "Video 2.0 Pro · ¥1,200"]
    assert "¥" not in video["description"]

    pro = await bot.slash("video", {"prompt": "a paper crane", "model": PRO_ID}, channel_id=channel)
    delivered = await double.wait_for_message(channel, timeout=30, predicate=posted_video)
    # Charged by the service at the model's own price, at the model's own create path.
    assert service.spend_by_model == {PRO_ID: 1_200}
    # Shown at its price: the delivery message and the private receipt.
    assert "¥1,200" in delivered["content"] and "¥250" not in delivered["content"]
    await wait_until(lambda: "delivered" in embed_text(original(double, pro)))
    receipt = embed_text(original(double, pro))
    assert "Cost: ¥1,200" in receipt and "Model: Video 2.0 Pro" in receipt

    # The default model, beside it, keeps its own price.
    fast = await bot.slash("video", {"prompt": "a paper boat", "seed": 3}, channel_id=channel)
    await wait_until(lambda: "delivered" in embed_text(original(double, fast)))
    assert "Cost: ¥250" in embed_text(original(double, fast))
    assert service.spend_by_model == {PRO_ID: 1_200, MODEL_ID: 250} and service.spend == 1_450
    assert await bot.stop() == 0

    # Recorded in the ledger at each model's price: the figures every quota and report counts from.
    store = await JobStore.open(tmp_path / "bot.sqlite3")
    try:
        jobs = sorted(await store.jobs_in_states(JobState), key=lambda job: job.id)
        assert [(job.model, job.charged_yen, job.state) for job in jobs] == [
            (PRO_ID, 1_200, JobState.DELIVERED), (MODEL_ID, 250, JobState.DELIVERED),
        ]
        assert await store.ledger() == (2, 1_450)
    finally:
        await store.close()
    assert "Traceback" not in bot.log()
