"""Every text the bot shows people, in English and Japanese, in one catalogue.

Japanese for a `ja` locale, English for everything else. Amounts: `¥1,250` in English,
`1,250円` in Japanese.
"""

from __future__ import annotations

from typing import Final

import discord
from discord import app_commands

EN: Final = "en"
JA: Final = "ja"

CATALOGUE: Final[dict[str, dict[str, str]]] = {
    EN: {
        # Command and option descriptions (Discord allows 100 characters each).
        "cmd.video": "Make an 8 s 1280x720 video with sound. Costs {price} from the shared budget; takes 1-3 minutes.",
        "cmd.video.prompt": "What the video shows (1 to 2,000 characters). Each video costs {price}.",
        # With several models, /video names no single price: the model option's choices show each one.
        "cmd.video.several": "Make a short video from the shared budget, at the chosen model's price; takes 1-3 minutes.",
        "cmd.video.prompt.several": "What the video shows (1 to 2,000 characters). The price depends on the model.",
        "cmd.video.model": "The model that makes the video; each choice shows its price. Empty: the default model.",
        "model.label": "{name} · {price}",
        "model.separator": ", ",
        "cmd.video.seed": "Optional seed, 0 to 4,294,967,295, to make a result repeatable.",
        "cmd.status": "Show your recent video requests, or one request in detail.",
        "cmd.status.job_id": "A request reference such as #42, or the service's job id.",
        "cmd.balance": "Show the shared budget: spent, limit, what is left, and this bot's own ledger.",
        # States, as people read them.
        "state.received": "received",
        "state.submitting": "being submitted",
        "state.pending": "queued",
        "state.in_progress": "generating",
        "state.completed": "finished, downloading",
        "state.downloaded": "downloaded, posting",
        "state.delivered": "delivered",
        "state.failed": "failed",
        "state.stalled": "stalled",
        "state.rejected": "not accepted",
        "state.unknown": "outcome unknown",
        "state.undeliverable": "could not be posted",
        "state.interrupted": "interrupted",
        # /video
        "video.title": "Video request {ref}",
        "video.field.job": "Job",
        "video.field.state": "State",
        "video.field.cost": "Cost",
        "video.field.model": "Model",
        "video.field.started": "Started",
        "video.field.wait": "Expected wait",
        "video.wait": "about 1-3 minutes",
        "video.next": "The video will be posted in this channel when it is ready. Check on it with `/status {ref}`.",
        "video.next.done": "Posted: {link}",
        "video.next.failed": "The job failed. It was charged at acceptance; support remedies failed jobs with "
        "service credit. Give them the job id `{job_id}`.",
        "video.next.undeliverable": "It could not be posted. Use `/status {ref}` to get the file.",
        "error.prompt_empty": "The prompt is empty. Describe the video you want. Nothing was spent.",
        "error.prompt_too_long": "The prompt has {length:,} characters; the limit is {limit:,}. Shorten it and try "
        "again. Nothing was spent.",
        "error.seed_range": "The seed must be a whole number from {low:,} to {high:,}. Nothing was spent.",
        "error.seed_unsupported": "This model does not take a seed. Nothing was spent.",
        "error.model_unknown": "There is no model `{model}`. Choose one of: {offered}. Nothing was spent.",
        "error.model_not_allowed": "This server does not allow the model `{model}`. Choose one of: {offered}. Nothing "
        "was spent.",
        "error.model_none_allowed": "This server allows no video model at the moment; ask its admins. Nothing was "
        "spent.",
        "error.rejected": "The video service did not accept request {ref}: {reason}. Nothing was charged ({zero}).",
        "error.busy": "The video service is busy or down right now, so request {ref} was not accepted. Nothing was "
        "charged ({zero}). Please try again in a few minutes.",
        "error.unknown_outcome": "Request {ref} was sent, but the video service did not answer. It may have been "
        "accepted and charged {price}. It will not be resent automatically, so no second charge can happen. Check "
        "`/status {ref}` or `/balance` before asking again; if it was charged, support can trace it.",
        "error.key_info_unreadable": "The video service's answer about the budget could not be read, so no figures "
        "are shown. Nothing was spent. The operator can see the details in the log.",
        "error.not_recorded": "The bot could not record request {ref} (its database is unavailable), so it was not "
        "sent. Nothing was spent ({zero}). Please try again later.",
        "error.store_unavailable": "The bot cannot record requests right now (its database is unavailable). "
        "Nothing was sent or spent. Please try again later.",
        "error.charged_unusable": "Request {ref} was accepted and charged {price}, but the video service's answer "
        "cannot be used: {reason}. The bot will not follow it. Give support the job id {job_id} and the reference "
        "{ref} for credit.",
        "error.charged_unrecorded": "Request {ref} was accepted as job {job_id} and charged {price}, but the bot "
        "could not record it yet. It keeps trying and will post the video here; if it cannot, it will tell you. "
        "Keep the job id {job_id} for support.",
        "error.budget": "The shared budget cannot pay for a video: {available} left of {max_budget} ({spend} "
        "spent), and one video costs {price}. Nothing was sent.",
        "error.service_unreachable": "The video service cannot be reached right now. Nothing was spent. Please try "
        "again later.",
        "error.internal": "Something went wrong on the bot's side. Nothing more was spent. If it happens again, "
        "tell the operator this reference: `{reference}`.",
        "error.guild_only": "This command works in a server, not in direct messages.",
        # Guardrails
        "refuse.cooldown": "You can ask for another video {when}. Nothing was spent.",
        "refuse.too_many_active": "You already have {active} videos in progress (the limit is {limit}). Try again "
        "when one is finished. Nothing was spent.",
        "refuse.guild_daily_cap": "This server has used its daily video budget ({spent} of {cap}). It resets {when}."
        " Nothing was spent.",
        "refuse.channel": "Videos cannot be requested in this channel. Nothing was spent.",
        "refuse.role": "You need the {role} role to request videos. Nothing was spent.",
        # /status
        "status.none": "You have no video requests in this server yet.",
        "status.list.title": "Your recent video requests",
        "status.list.line": "`{ref}` {state} · {cost} · {age}",
        "status.not_found": "No request `{reference}` was found in this server. Use `/status` without an id to list "
        "yours.",
        "status.title": "Request {ref}",
        "status.field.prompt": "Prompt",
        "status.field.seed": "Seed",
        "status.field.seed.none": "random",
        "status.field.elapsed": "Requested",
        "status.next.received": "It is about to be sent to the video service.",
        "status.next.submitting": "It is being sent to the video service.",
        "status.next.interrupted": "The bot stopped before it was sent to the video service. Nothing was spent; "
        "please ask again.",
        "status.next.pending": "It is queued at the video service; the video will be posted in <#{channel}>.",
        "status.next.in_progress": "It is being generated; the video will be posted in <#{channel}>.",
        "status.next.completed": "It is finished and being downloaded; it will be posted shortly.",
        "status.next.downloaded": "It is downloaded and being posted.",
        "status.next.delivered": "It was posted in <#{channel}>.",
        "status.next.failed": "The job failed. It was charged {price} at acceptance; support remedies failed jobs "
        "with service credit. Give them the job id `{job_id}`.",
        "status.next.stalled": "The job did not finish within {hours} hours, so the bot stopped checking it. Give "
        "support the job id `{job_id}`.",
        "status.next.rejected": "The video service did not accept it: {reason}. Nothing was charged.",
        "status.next.unknown": "The request was sent but no answer came back, so the bot cannot tell whether it was "
        "accepted and charged. It is never resent automatically. Compare `/balance` with what you expected, or ask "
        "the operator to check the service's records.",
        "status.next.undeliverable": "It could not be posted in the channel or by DM. Here is the file.",
        "status.handover.missing": "It could not be posted, and its file is no longer on the bot's disk. Ask the "
        "operator.",
        "status.handover.too_big": "It could not be posted and the file is too large to attach here. Ask the "
        "operator for it (job id `{job_id}`).",
        # /balance
        "balance.title": "Shared video budget",
        "balance.key": "Key",
        "balance.spend": "Spent",
        "balance.max": "Budget",
        "balance.available": "Available",
        "balance.videos_left": "Videos left",
        "balance.no_limit": "no budget set",
        "balance.videos_left.value": "{count:,} at {price} each",
        "balance.ledger": "This bot's ledger",
        "balance.ledger.value": "All time: {all_count:,} videos, {all_yen}\nThis server: {guild_count:,} videos, "
        "{guild_yen}",
        # Worker messages in the channel (or DM)
        "deliver.done": "{mention} your video {ref} is ready.\n> {prompt}\nSeed: {seed} · Job: `{job_id}` · Cost: "
        "{price}",
        "deliver.compressed": "The original was larger than this server's upload limit, so this is a compressed "
        "copy.",
        "deliver.dm_note": "It could not be posted in <#{channel}>, so here it is by direct message.",
        "deliver.undeliverable": "{mention} your video {ref} is ready, but it could not be posted here or by direct "
        "message. Use `/status {ref}` to get the file.",
        "deliver.failed": "{mention} your video {ref} failed: {reason}. It was charged {price} at acceptance; "
        "support remedies failed jobs with service credit. Give them the job id {job_id} and the reference {ref}. "
        "It will not be resubmitted.",
        "deliver.interrupted": "{mention} your video request {ref} was cut off when the bot stopped, before it was "
        "sent to the video service. Nothing was spent. Please ask again.",
        "deliver.rejected": "{mention} your video request {ref} was not accepted: {reason}. Nothing was charged.",
        "deliver.storage_wait": "{mention} your video {ref} is finished, but the bot has no disk space to keep it "
        "right now. It keeps trying; the operator has been warned in the log.",
        "deliver.unrecorded": "{mention} your video request {ref} was accepted as job {job_id} and charged {price}, "
        "but the bot could not record it and cannot follow it. Give support the job id {job_id}.",
        "deliver.slow": "{mention} your video {ref} is taking unusually long (over {minutes} minutes). The bot keeps "
        "checking; nothing is lost.",
        "deliver.stalled": "{mention} your video {ref} did not finish within {hours} hours, so the bot stopped "
        "checking it. Give support the job id {job_id}.",
        "deliver.unknown": "{mention} your video request {ref} was being sent when the bot stopped, so it cannot "
        "tell whether the video service accepted it (and charged {price}). It will not be resent automatically. "
        "Check `/status {ref}` before asking again.",
    },
    JA: {
        "cmd.video": "8秒・1280x720・音声付きの動画を作ります。共有予算から{price}、1〜3分かかります。",
        "cmd.video.prompt": "動画の内容（1〜2,000文字）。1本{price}です。",
        "cmd.video.several": "共有予算で短い動画を作ります。料金は選んだモデルによります。1〜3分かかります。",
        "cmd.video.prompt.several": "動画の内容（1〜2,000文字）。料金はモデルによります。",
        "cmd.video.model": "動画を作るモデル。選択肢に料金が出ます。空欄なら既定のモデルです。",
        "model.label": "{name}・{price}",
        "model.separator": "、",
        "cmd.video.seed": "任意のシード値（0〜4,294,967,295）。同じ結果を再現したいときに。",
        "cmd.status": "最近の動画リクエスト、または1件の詳細を表示します。",
        "cmd.status.job_id": "#42 のような受付番号、またはサービスのジョブID。",
        "cmd.balance": "共有予算（使用額・上限・残り）とこのボットの記録を表示します。",
        "state.received": "受付済み",
        "state.submitting": "送信中",
        "state.pending": "順番待ち",
        "state.in_progress": "生成中",
        "state.completed": "完成・ダウンロード中",
        "state.downloaded": "ダウンロード済み・投稿中",
        "state.delivered": "投稿済み",
        "state.failed": "失敗",
        "state.stalled": "停止",
        "state.rejected": "受付されず",
        "state.unknown": "結果不明",
        "state.undeliverable": "投稿できず",
        "state.interrupted": "中断",
        "video.title": "動画リクエスト {ref}",
        "video.field.job": "ジョブ",
        "video.field.state": "状態",
        "video.field.cost": "費用",
        "video.field.model": "モデル",
        "video.field.started": "開始",
        "video.field.wait": "待ち時間の目安",
        "video.wait": "約1〜3分",
        "video.next": "完成したらこのチャンネルに投稿します。`/status {ref}` で確認できます。",
        "video.next.done": "投稿しました: {link}",
        "video.next.failed": "ジョブが失敗しました。受付時に課金済みです。サポートがサービスクレジットで補填します。"
        "ジョブID `{job_id}` を伝えてください。",
        "video.next.undeliverable": "投稿できませんでした。`/status {ref}` でファイルを受け取れます。",
        "error.prompt_empty": "プロンプトが空です。作りたい動画を書いてください。費用はかかっていません。",
        "error.prompt_too_long": "プロンプトが{length:,}文字あります。上限は{limit:,}文字です。短くしてもう一度どうぞ。"
        "費用はかかっていません。",
        "error.seed_range": "シード値は{low:,}〜{high:,}の整数にしてください。費用はかかっていません。",
        "error.seed_unsupported": "このモデルはシード値を使えません。費用はかかっていません。",
        "error.model_unknown": "モデル `{model}` はありません。次から選んでください：{offered}。費用はかかっていません。",
        "error.model_not_allowed": "このサーバーではモデル `{model}` を使えません。次から選んでください：{offered}。"
        "費用はかかっていません。",
        "error.model_none_allowed": "このサーバーでは今使えるモデルがありません。管理者に確認してください。費用はかかっていません。",
        "error.rejected": "動画サービスがリクエスト {ref} を受け付けませんでした: {reason}。課金はありません（{zero}）。",
        "error.busy": "動画サービスが混雑しているか停止中のため、リクエスト {ref} は受け付けられませんでした。"
        "課金はありません（{zero}）。数分後にもう一度お試しください。",
        "error.unknown_outcome": "リクエスト {ref} は送信しましたが、動画サービスから応答がありませんでした。"
        "受け付けられて{price}が課金された可能性があります。二重課金を防ぐため自動では再送しません。"
        "もう一度頼む前に `/status {ref}` か `/balance` で確認してください。課金されていればサポートが追跡できます。",
        "error.key_info_unreadable": "動画サービスの予算に関する応答を読み取れなかったため、数値は表示しません。"
        "費用はかかっていません。詳細は運営者がログで確認できます。",
        "error.not_recorded": "ボットがリクエスト {ref} を記録できなかったため（データベースが使えません）、送信していません。"
        "費用はかかっていません（{zero}）。後でもう一度お試しください。",
        "error.store_unavailable": "ボットは今リクエストを記録できません（データベースが使えません）。送信も課金もしていません。"
        "後でもう一度お試しください。",
        "error.charged_unusable": "リクエスト {ref} は受け付けられ{price}が課金されましたが、動画サービスの応答が使えません：{reason}。"
        "ボットは追跡しません。ジョブID {job_id} と参照 {ref} をサポートに伝えてクレジットを受けてください。",
        "error.charged_unrecorded": "リクエスト {ref} はジョブ {job_id} として受け付けられ{price}が課金されましたが、"
        "ボットがまだ記録できていません。再試行を続け、動画はここに投稿します。できない場合はお知らせします。"
        "サポート用にジョブID {job_id} を控えてください。",
        "error.budget": "共有予算が足りません: 残り{available}（上限{max_budget}、使用済み{spend}）、1本{price}です。"
        "何も送信していません。",
        "error.service_unreachable": "動画サービスに接続できません。費用はかかっていません。後でもう一度お試しください。",
        "error.internal": "ボット側で問題が起きました。追加の費用はかかっていません。繰り返す場合は運営者にこの参照を"
        "伝えてください: `{reference}`",
        "error.guild_only": "このコマンドはサーバー内で使えます（DMでは使えません）。",
        "refuse.cooldown": "次の動画は{when}から頼めます。費用はかかっていません。",
        "refuse.too_many_active": "進行中の動画がすでに{active}本あります（上限{limit}本）。どれかが終わってから"
        "もう一度どうぞ。費用はかかっていません。",
        "refuse.guild_daily_cap": "このサーバーは今日の動画予算を使い切りました（{cap}中{spent}）。{when}にリセット"
        "されます。費用はかかっていません。",
        "refuse.channel": "このチャンネルでは動画をリクエストできません。費用はかかっていません。",
        "refuse.role": "動画をリクエストするには{role}ロールが必要です。費用はかかっていません。",
        "status.none": "このサーバーでの動画リクエストはまだありません。",
        "status.list.title": "最近の動画リクエスト",
        "status.list.line": "`{ref}` {state} · {cost} · {age}",
        "status.not_found": "このサーバーにリクエスト `{reference}` は見つかりません。IDなしの `/status` で一覧を"
        "表示できます。",
        "status.title": "リクエスト {ref}",
        "status.field.prompt": "プロンプト",
        "status.field.seed": "シード",
        "status.field.seed.none": "ランダム",
        "status.field.elapsed": "依頼",
        "status.next.received": "まもなく動画サービスに送信します。",
        "status.next.submitting": "動画サービスに送信中です。",
        "status.next.interrupted": "動画サービスに送る前にボットが停止しました。費用はかかっていません。もう一度お試しください。",
        "status.next.pending": "動画サービスで順番待ちです。完成したら<#{channel}>に投稿します。",
        "status.next.in_progress": "生成中です。完成したら<#{channel}>に投稿します。",
        "status.next.completed": "完成し、ダウンロード中です。まもなく投稿します。",
        "status.next.downloaded": "ダウンロード済みで、投稿中です。",
        "status.next.delivered": "<#{channel}>に投稿しました。",
        "status.next.failed": "ジョブが失敗しました。受付時に{price}が課金済みです。サポートがサービスクレジットで"
        "補填します。ジョブID `{job_id}` を伝えてください。",
        "status.next.stalled": "{hours}時間以内に完成しなかったため、確認を止めました。サポートにジョブID `{job_id}`"
        " を伝えてください。",
        "status.next.rejected": "動画サービスが受け付けませんでした: {reason}。課金はありません。",
        "status.next.unknown": "送信しましたが応答がなく、受け付けられて課金されたかどうか分かりません。自動で再送は"
        "しません。`/balance` を確認するか、運営者にサービス側の記録を確認してもらってください。",
        "status.next.undeliverable": "チャンネルにもDMにも投稿できませんでした。ファイルをどうぞ。",
        "status.handover.missing": "投稿できず、ファイルもボットのディスクに残っていません。運営者に連絡してください。",
        "status.handover.too_big": "投稿できず、ファイルが大きすぎてここに添付できません。運営者に連絡してください"
        "（ジョブID `{job_id}`）。",
        "balance.title": "共有動画予算",
        "balance.key": "キー",
        "balance.spend": "使用済み",
        "balance.max": "上限",
        "balance.available": "残り",
        "balance.videos_left": "作れる本数",
        "balance.no_limit": "予算の設定なし",
        "balance.videos_left.value": "{count:,}本（1本{price}）",
        "balance.ledger": "このボットの記録",
        "balance.ledger.value": "累計: {all_count:,}本、{all_yen}\nこのサーバー: {guild_count:,}本、{guild_yen}",
        "deliver.done": "{mention} 動画 {ref} ができました。\n> {prompt}\nシード: {seed} · ジョブ: `{job_id}` · 費用: "
        "{price}",
        "deliver.compressed": "元のファイルがこのサーバーのアップロード上限を超えたため、圧縮したコピーです。",
        "deliver.dm_note": "<#{channel}>に投稿できなかったため、DMでお送りします。",
        "deliver.undeliverable": "{mention} 動画 {ref} ができましたが、ここにもDMにも投稿できませんでした。"
        "`/status {ref}` でファイルを受け取れます。",
        "deliver.failed": "{mention} 動画 {ref} は失敗しました：{reason}。受付時に{price}が課金済みです。"
        "サポートがサービスクレジットで補填します。ジョブID {job_id} と参照 {ref} を伝えてください。再送はしません。",
        "deliver.interrupted": "{mention} 動画リクエスト {ref} は、動画サービスに送る前にボットが停止したため中断されました。"
        "費用はかかっていません。もう一度お試しください。",
        "deliver.rejected": "{mention} 動画リクエスト {ref} は受け付けられませんでした：{reason}。課金されていません。",
        "deliver.storage_wait": "{mention} 動画 {ref} は完成しましたが、ボットのディスクに空きがなく保存できません。"
        "再試行を続けています。運営者にはログで知らせています。",
        "deliver.unrecorded": "{mention} 動画リクエスト {ref} はジョブ {job_id} として受け付けられ{price}が課金されましたが、"
        "ボットが記録できず追跡できません。サポートにジョブID {job_id} を伝えてください。",
        "deliver.slow": "{mention} 動画 {ref} にいつもより時間がかかっています（{minutes}分以上）。確認を続けています。"
        "失われることはありません。",
        "deliver.stalled": "{mention} 動画 {ref} は{hours}時間以内に完成しなかったため、確認を止めました。"
        "サポートにジョブID {job_id} を伝えてください。",
        "deliver.unknown": "{mention} 動画リクエスト {ref} の送信中にボットが停止したため、動画サービスが受け付けて"
        "{price}を課金したかどうか分かりません。自動では再送しません。もう一度頼む前に `/status {ref}` で確認してください。",
    },
}


def language(locale: str | discord.Locale | None) -> str:
    """`ja` for Japanese clients, `en` for everyone else."""
    value = locale.value if isinstance(locale, discord.Locale) else (locale or "")
    return JA if value.lower().startswith("ja") else EN


def t(locale: str | discord.Locale | None, key: str, **params: object) -> str:
    """The text for `key` in the locale's language, filled with `params`."""
    return CATALOGUE[language(locale)][key].format(**params)


def yen(amount: int, locale: str | discord.Locale | None) -> str:
    if language(locale) == JA:
        return f"{amount:,}円"
    return f"-¥{-amount:,}" if amount < 0 else f"¥{amount:,}"


def description(locale: str | discord.Locale | None, key: str, price_yen: int | None = None,
                name: str | None = None) -> str:
    """A command or option description (or a choice's name); `{price}` is filled in the locale's own currency
    format, `{name}` as given."""
    params: dict[str, object] = {"price": yen(price_yen, locale)} if price_yen is not None else {}
    if name is not None:
        params["name"] = name
    return t(locale, key, **params)


def described(key: str, *, price_yen: int | None = None, name: str | None = None) -> app_commands.locale_str:
    """An English description that the translator localizes by its catalogue key."""
    return app_commands.locale_str(description(EN, key, price_yen, name), key=key, price_yen=price_yen, name=name)


class CatalogueTranslator(app_commands.Translator):
    """Gives Japanese clients Japanese command descriptions; command names stay English."""

    async def translate(
        self, string: app_commands.locale_str, locale: discord.Locale, context: app_commands.TranslationContextTypes
    ) -> str | None:
        key = string.extras.get("key")
        if key is None or language(locale) != JA:
            return None
        return description(locale, key, string.extras.get("price_yen"), string.extras.get("name"))
