"""The model catalogue: the models file, its strict checks, the one price lookup, and choosing a model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot.app import catalogue_of
from bot.core.errors import ModelUnavailable
from bot.frontend import embeds
from bot.service.catalogue import (
    BUILT_IN,
    DEFAULT_MODEL,
    Catalogue,
    CatalogueError,
    VideoModel,
    choose_model,
    load_catalogue,
    parse_catalogue,
)
from tests.frontend.cogs.helpers import bot_settings
from tests.frontend.test_command_schema import TWO_MODELS
from tests.frontend.test_embeds import job

PRO_ID = "provider/video-model-2.0-pro"
TWO = f'default = "{PRO_ID}"\n' + TWO_MODELS


def entry(**fields: object) -> str:
    """One [[models]] table: a valid one, with `fields` changed (None drops a key)."""
    values: dict[str, object] = {"id": "m", "create_path": "/v/create", "price_yen": 100, **fields}
    lines = [f"{key} = {value!r}".replace("'", '"').replace("True", "true").replace("False", "false")
             for key, value in values.items() if value is not None]
    return "[[models]]\n" + "\n".join(lines) + "\n"


def problems(text: str) -> list[str]:
    with pytest.raises(CatalogueError) as error:
        parse_catalogue(text, "models.toml")
    assert error.value.source == "models.toml" and "models.toml" in str(error.value)
    return error.value.problems


# -- loading -------------------------------------------------------------------------------------------


def test_without_a_file_the_catalogue_is_the_specs_one_model() -> None:
    catalogue = load_catalogue(None)

    assert catalogue is BUILT_IN
    assert catalogue.ids == ("provider/video-model-2.0-fast",)
    assert catalogue.default.create_path == "/gateway/videos/create" and catalogue.default.supports_seed
    assert catalogue.price_of(catalogue.default_id) == 250
    assert not catalogue.several


def test_a_file_gives_every_model_its_path_price_and_seed_support(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(TWO, encoding="utf-8")

    settings = bot_settings("http://127.0.0.1:9", "sk-key-000000000", tmp_path / "db", MODELS_FILE=str(path))
    catalogue = catalogue_of(settings)

    assert catalogue.several and len(catalogue) == 2
    assert catalogue.default_id == PRO_ID
    pro = catalogue.get(PRO_ID)
    assert (pro.name, pro.create_path, pro.supports_seed) == ("Video 2.0 Pro", "/gateway/videos/create-pro", False)
    assert [catalogue.price_of(m.id) for m in catalogue] == [250, 1_200]
    assert catalogue.offer({PRO_ID}) == (("Video 2.0 Pro", 1_200),)


def test_the_default_is_the_first_model_and_the_name_the_id_unless_given() -> None:
    catalogue = parse_catalogue(entry(id="a") + entry(id="b", create_path="/b"))

    assert catalogue.default_id == "a" and catalogue.default.name == "a"


def test_the_catalogue_cannot_be_changed() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        BUILT_IN.default_id = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_MODEL.price_yen = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "no models"),
        ("models = []", "no models"),
        ("[[models]\n", "not valid TOML"),
        (entry() + 'colour = "red"\n', "unknown key 'colour'"),
        ('title = "x"\n' + entry(), "unknown key 'title'"),
        (entry(price_yen=0), "model 1 ('m'): price_yen must be a whole number of yen above 0"),
        (entry(price_yen=-250), "price_yen must be a whole number"),
        (entry(price_yen=2.5), "price_yen must be a whole number"),
        (entry(price_yen="250"), "price_yen must be a whole number"),
        (entry(price_yen=True), "price_yen must be a whole number"),
        (entry(price_yen=None), "price_yen must be a whole number"),
        (entry(id=None), "model 1: id must be printable text"),
        (entry(id=""), "id must be printable text"),
        (entry(id=" padded "), "id must be printable text"),
        (entry(id="x" * 101), "id must be printable text of 1 to 100"),
        (entry(name="n" * 61), "name must be printable text of 1 to 60"),
        (entry(seed="yes"), "seed must be true or false"),
        (entry(create_path=None), "create_path must be an absolute path"),
        (entry(create_path="gateway/videos/create"), "create_path must be an absolute path"),
        (entry(create_path="https://evil.example/create"), "create_path must be an absolute path"),
        (entry(create_path="//evil.example/create"), "create_path must be an absolute path"),
        (entry(create_path="/gateway/../key/info"), "create_path must be an absolute path"),
        (entry(create_path="/gateway/./create"), "create_path must be an absolute path"),
        (entry(create_path="/gateway/videos/create?model=x"), "create_path must be an absolute path"),
        (entry(create_path="/gateway/videos/create#x"), "create_path must be an absolute path"),
        (entry(create_path="/gateway/%2e%2e/create"), "create_path must be an absolute path"),
        (entry(create_path="/gateway/videos/"), "create_path must be an absolute path"),
        (entry(create_path="/a b"), "create_path must be an absolute path"),
        (entry() + entry(create_path="/other"), "id 'm' is used by more than one model"),
        (entry() + entry(id="n"), "create_path '/v/create' is used by more than one model"),
        ('default = "nope"\n' + entry(), "default 'nope' is not one of the models"),
        ("default = 3\n" + entry(), "default must be a model id"),
        ("models = [1]", "model 1: must be a table"),
        ("".join(entry(id=f"m{n}", create_path=f"/m{n}") for n in range(26)), "26 models: Discord offers at most 25"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_entry(text: str, expected: str) -> None:
    assert any(expected in problem for problem in problems(text)), problems(text)


def test_every_problem_is_listed_at_once() -> None:
    found = problems(entry(price_yen=0) + entry(id="n", create_path="../x", seed=1))

    assert len(found) == 3
    assert found[0].startswith("model 1 ('m'): price_yen")
    assert all(problem.startswith("model 2 ('n'): ") for problem in found[1:])


def test_problems_of_the_whole_file_come_in_the_same_round_as_an_entrys() -> None:
    # A fault in one entry no longer hides the duplicate id, the duplicate path and the bad default.
    found = problems('default = "nope"\n' + entry(price_yen=0) + entry() + entry(id="n", price_yen=1))

    assert found == [
        "model 1 ('m'): price_yen must be a whole number of yen above 0",
        "id 'm' is used by more than one model",
        "create_path '/v/create' is used by more than one model",
        "default 'nope' is not one of the models",
    ]


def test_a_missing_or_unreadable_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(CatalogueError, match=r"nope\.toml") as error:
        load_catalogue(missing)
    assert error.value.problems == ["cannot read it: No such file or directory"]
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(CatalogueError, match=r"binary\.toml"):
        load_catalogue(binary)


def test_a_catalogue_built_in_code_is_checked_too() -> None:
    with pytest.raises(CatalogueError, match="is not one of the models"):
        Catalogue((DEFAULT_MODEL,), "other")
    with pytest.raises(CatalogueError, match="no models"):
        Catalogue((), "")


# -- the one price lookup ----------------------------------------------------------------------------------


def test_price_of_a_model_the_catalogue_lacks_is_refused() -> None:
    with pytest.raises(ModelUnavailable) as error:
        BUILT_IN.price_of("provider/gone")
    assert error.value.problem == "unknown" and error.value.offered == (("Video 2.0 Fast", 250),)


def test_the_views_price_a_job_by_its_charge_else_its_own_model() -> None:
    two = parse_catalogue(TWO)
    waiting = job(model=PRO_ID, charged_yen=0, state=embeds.S.SUBMITTING)

    assert embeds.receipt_embed(waiting, catalogue=two).fields[3].value == "¥1,200"
    assert "¥1,200" in embeds.announcement_text(dataclasses.replace(waiting, state=embeds.S.UNKNOWN), "unknown",
                                               catalogue=two)
    # Once charged, the charge is what is shown, whatever the catalogue says now.
    charged = job(model=PRO_ID, charged_yen=1_000)
    assert "¥1,000" in embeds.delivered_text(charged, catalogue=two, compressed=False, via_dm=False)
    # A model that left the catalogue (a restart with another file) shows no price rather than a wrong one.
    assert "—" in embeds.announcement_text(dataclasses.replace(waiting, state=embeds.S.UNKNOWN), "unknown",
                                          catalogue=BUILT_IN)


def test_the_receipt_names_the_model_only_when_there_is_a_choice() -> None:
    two = parse_catalogue(TWO)

    assert {"Model": "Video 2.0 Pro"}.items() <= {str(f.name): str(f.value) for f in
                                                  embeds.receipt_embed(job(model=PRO_ID), catalogue=two).fields}.items()
    assert "Model" not in [f.name for f in embeds.receipt_embed(job(), catalogue=BUILT_IN).fields]


# -- choosing a model ------------------------------------------------------------------------------------


@pytest.fixture
def three() -> Catalogue:
    return Catalogue(
        (DEFAULT_MODEL, VideoModel("pro", "Pro", "/pro", 1_200, True), VideoModel("lite", "Lite", "/lite", 90, False)),
        DEFAULT_MODEL.id,
    )


def test_the_requested_model_wins(three: Catalogue) -> None:
    assert choose_model(three, "pro").id == "pro"
    assert choose_model(three, "lite", allowed={"lite", "pro"}, default="pro").id == "lite"


def test_without_a_request_the_servers_default_then_the_catalogues(three: Catalogue) -> None:
    assert choose_model(three, None).id == DEFAULT_MODEL.id
    assert choose_model(three, None, default="pro").id == "pro"
    # A server default that left the catalogue or is no longer allowed gives way.
    assert choose_model(three, None, default="gone").id == DEFAULT_MODEL.id
    assert choose_model(three, None, allowed={DEFAULT_MODEL.id, "lite"}, default="pro").id == DEFAULT_MODEL.id
    # ... to the first allowed model when the catalogue's default is not allowed either.
    assert choose_model(three, None, allowed={"lite", "pro"}).id == "pro"


def test_a_model_not_in_the_catalogue_is_refused(three: Catalogue) -> None:
    with pytest.raises(ModelUnavailable) as error:
        choose_model(three, "gone", allowed={"pro"})
    assert (error.value.problem, error.value.model_id, error.value.offered) == ("unknown", "gone", (("Pro", 1_200),))


def test_a_model_the_server_does_not_allow_is_refused_with_what_it_allows(three: Catalogue) -> None:
    with pytest.raises(ModelUnavailable) as error:
        choose_model(three, "pro", allowed={"lite", DEFAULT_MODEL.id})
    assert error.value.problem == "not_allowed"
    assert error.value.offered == (("Video 2.0 Fast", 250), ("Lite", 90))


def test_a_server_that_allows_no_model_refuses_every_request(three: Catalogue) -> None:
    with pytest.raises(ModelUnavailable) as error:
        choose_model(three, None, allowed=set())
    assert error.value.problem == "none_allowed" and error.value.offered == ()
    with pytest.raises(ModelUnavailable, match="not allowed"):
        choose_model(three, "pro", allowed=())


def test_the_refusals_read_well_in_both_languages() -> None:
    error = ModelUnavailable("not_allowed", "pro", offered=(("Video 2.0 Fast", 250), ("Lite", 90)))

    assert embeds.model_text(error, "en-US") == ("This server does not allow the model `pro`. Choose one of: "
                                                "Video 2.0 Fast · ¥250, Lite · ¥90. Nothing was spent.")
    assert embeds.model_text(error, "ja") == ("このサーバーではモデル `pro` を使えません。次から選んでください："
                                             "Video 2.0 Fast・250円、Lite・90円。費用はかかっていません。")
