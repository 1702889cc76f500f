"""The catalogue of video models: a second model is one more entry in a file, not new code.

The service has one create endpoint per model, each with its own flat price. The catalogue comes from
a TOML file (the `MODELS_FILE` setting) or, without one, is the spec's one model. Every price the bot
shows, records or counts is read through `Catalogue.price_of`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.core.discord_limits import CHOICE_VALUE, CHOICES
from bot.core.errors import ModelUnavailable

#: Each model is a choice of /video's option: Discord offers so many.
MAX_MODELS = CHOICES
#: A choice shows "name · price" in CHOICE_NAME characters: the name leaves room for the price.
MAX_NAME_CHARS = 60
#: A choice's value is the model's id.
MAX_ID_CHARS = CHOICE_VALUE
#: A model's name as shown: its name, or its id when it has none.
MAX_SHOWN_NAME_CHARS = max(MAX_NAME_CHARS, MAX_ID_CHARS)
# Plain path segments only: no host, scheme, query, fragment, percent-escapes or dot segments.
_SAFE_PATH = re.compile(r"(/[A-Za-z0-9._~-]+)+")
_MODEL_KEYS = frozenset({"id", "name", "create_path", "price_yen", "seed"})
_FILE_KEYS = frozenset({"default", "models"})


@dataclass(frozen=True)
class VideoModel:
    id: str
    name: str
    create_path: str
    # Read it through `Catalogue.price_of`: the one place a price is read.
    price_yen: int
    supports_seed: bool


#: The model the service's spec lists; the whole catalogue when no models file is set.
DEFAULT_MODEL = VideoModel(
    id="provider/video-model-2.0-fast",
    name="Video 2.0 Fast",
    create_path="/gateway/videos/create",
    price_yen=250,
    supports_seed=True,
)


class CatalogueError(ValueError):
    """Every problem found in a models file, listed at once, each naming the file and the entry."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"invalid models file {source}:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class Catalogue:
    """The models this bot may use and the default one; immutable once built."""

    models: tuple[VideoModel, ...]
    default_id: str

    def __post_init__(self) -> None:
        problems = _catalogue_problems(self.models, self.default_id)
        if problems:
            raise CatalogueError("(in code)", problems)

    def __len__(self) -> int:
        return len(self.models)

    def __iter__(self) -> Iterator[VideoModel]:
        return iter(self.models)

    def __contains__(self, model_id: object) -> bool:
        return any(model.id == model_id for model in self.models)

    @property
    def default(self) -> VideoModel:
        return self.get(self.default_id)

    @property
    def several(self) -> bool:
        """More than one model: `/video` offers a choice."""
        return len(self.models) > 1

    def get(self, model_id: str) -> VideoModel:
        """The model of this id; ModelUnavailable (unknown) if the catalogue has none."""
        for model in self.models:
            if model.id == model_id:
                return model
        raise ModelUnavailable("unknown", model_id, offered=self.offer(self.ids))

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(model.id for model in self.models)

    def price_of(self, model_id: str) -> int:
        """The flat price of a video of `model_id`: the one place a price is read from."""
        return self.get(model_id).price_yen

    def offer(self, model_ids: Collection[str]) -> tuple[tuple[str, int], ...]:
        """(name, price) of these models, in catalogue order: what a refusal offers instead."""
        return tuple((model.name, self.price_of(model.id)) for model in self.models if model.id in model_ids)


def choose_model(
    catalogue: Catalogue,
    requested: str | None,
    *,
    allowed: Collection[str] | None = None,
    default: str | None = None,
) -> VideoModel:
    """The model a request uses: the one asked for, else the server's default, else the catalogue's.

    `allowed` (None: every model) and `default` are a server's choices. A request for a model that the
    catalogue lacks or the server does not allow raises ModelUnavailable. With nothing asked for, a server
    default that left the catalogue (or is not allowed) gives way to the catalogue's default, then to the
    first allowed model; a server that allows none refuses.
    """
    offered = catalogue.ids if allowed is None else tuple(i for i in catalogue.ids if i in allowed)
    if requested is not None:
        if requested not in catalogue:
            raise ModelUnavailable("unknown", requested, offered=catalogue.offer(offered))
        if requested not in offered:
            raise ModelUnavailable("not_allowed", requested, offered=catalogue.offer(offered))
        return catalogue.get(requested)
    for candidate in (default, catalogue.default_id, *offered):
        if candidate is not None and candidate in offered:
            return catalogue.get(candidate)
    raise ModelUnavailable("none_allowed", default or catalogue.default_id, offered=())


# -- the models file -------------------------------------------------------------------------------


def load_catalogue(path: Path | None) -> Catalogue:
    """The catalogue in `path` (TOML), or the built-in one without a path; raises CatalogueError."""
    if path is None:
        return BUILT_IN
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise CatalogueError(source, [f"cannot read it: {reason}"]) from None
    return parse_catalogue(text, source)


def parse_catalogue(text: str, source: str = "<text>") -> Catalogue:
    """Read a models file's TOML text; raises CatalogueError naming `source` and each bad entry.

    default = "provider/video-model-2.0-fast"   # optional: the first model otherwise
    [[models]]
    id = "provider/video-model-2.0-fast"        # the service's model identifier
    name = "Video 2.0 Fast"                     # optional: what people see; the id otherwise
    create_path = "/gateway/videos/create"      # the model's own create endpoint, on VIDEO_API_BASE_URL
    price_yen = 250                             # the flat price per video
    seed = true                                 # optional: whether it takes a seed (false otherwise)
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(source, [f"not valid TOML: {exc}"]) from None
    problems = [f"unknown key {key!r} (expected: default, models)" for key in sorted(data.keys() - _FILE_KEYS)]
    entries = data.get("models")
    if not isinstance(entries, list) or not entries:
        problems.append("no models: add at least one [[models]] entry")
        raise CatalogueError(source, problems)
    models: list[VideoModel] = []
    for number, entry in enumerate(entries, start=1):
        model = _model(entry, f"model {number}", problems)
        if model is not None:
            models.append(model)
    # The file as a whole, on what its entries say even where an entry has faults of its own: every problem in
    # one round, not the next ones only after the first are fixed.
    ids = [entry["id"] for entry in entries if isinstance(entry, Mapping) and isinstance(entry.get("id"), str)]
    paths = [entry["create_path"] for entry in entries
             if isinstance(entry, Mapping) and isinstance(entry.get("create_path"), str)]
    default = data.get("default", ids[0] if ids else "")
    if not isinstance(default, str):
        problems.append("default must be a model id (a string)")
    else:
        problems += _whole_file_problems(len(entries), ids, paths, default)
    if problems:
        raise CatalogueError(source, problems)
    return Catalogue(tuple(models), default)


def _model(entry: object, where: str, problems: list[str]) -> VideoModel | None:
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: must be a table ([[models]])")
        return None
    if isinstance(entry.get("id"), str) and entry["id"]:
        where = f"{where} ({entry['id']!r})"
    found = len(problems)
    problems.extend(f"{where}: unknown key {key!r}" for key in sorted(set(entry) - _MODEL_KEYS))
    model_id = _text(entry, "id", where, problems, required=True, limit=MAX_ID_CHARS)
    name = _text(entry, "name", where, problems, required=False, limit=MAX_NAME_CHARS) or model_id
    path = entry.get("create_path")
    if not isinstance(path, str) or not _safe_path(path):
        problems.append(f"{where}: create_path must be an absolute path such as /gateway/videos/create "
                        "(letters, digits and . _ ~ - only; no host, query or '..')")
    price = entry.get("price_yen")
    if isinstance(price, bool) or not isinstance(price, int) or price <= 0:
        problems.append(f"{where}: price_yen must be a whole number of yen above 0")
    seed = entry.get("seed", False)
    if not isinstance(seed, bool):
        problems.append(f"{where}: seed must be true or false")
    if len(problems) > found or not isinstance(price, int):
        return None
    return VideoModel(id=model_id, name=name, create_path=str(path), price_yen=price, supports_seed=bool(seed))


def _text(entry: Mapping[str, Any], key: str, where: str, problems: list[str], *, required: bool, limit: int) -> str:
    value = entry.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip() or len(value) > limit or not value.isprintable() \
            or value != value.strip():
        problems.append(f"{where}: {key} must be printable text of 1 to {limit} characters")
        return ""
    return value


def _safe_path(path: str) -> bool:
    return _SAFE_PATH.fullmatch(path) is not None and not any(part in (".", "..") for part in path.split("/"))


def _catalogue_problems(models: tuple[VideoModel, ...], default_id: str) -> list[str]:
    """What is wrong with the catalogue as a whole (each model being well-formed already)."""
    if not models:
        return ["no models: add at least one [[models]] entry"]
    return _whole_file_problems(len(models), [m.id for m in models], [m.create_path for m in models], default_id)


def _whole_file_problems(count: int, ids: list[str], paths: list[str], default_id: str) -> list[str]:
    """Too many models, an id or a create path used twice, a default that is none of the ids."""
    problems: list[str] = []
    if count > MAX_MODELS:
        problems.append(f"{count} models: Discord offers at most {MAX_MODELS} choices")
    for what, values in (("id", ids), ("create_path", paths)):
        for value in sorted({v for v in values if values.count(v) > 1}):
            problems.append(f"{what} {value!r} is used by more than one model")
    if ids and default_id not in ids:
        problems.append(f"default {default_id!r} is not one of the models")
    return problems


#: The catalogue without a models file: the spec's one model.
BUILT_IN = Catalogue((DEFAULT_MODEL,), DEFAULT_MODEL.id)
