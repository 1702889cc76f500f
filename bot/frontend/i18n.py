"""Every text the bot shows people, in English and Japanese, in one catalogue.

Japanese for a `ja` locale, English for everything else. Amounts: `¥1,250` in English,
`1,250円` in Japanese.
"""

from __future__ import annotations

from typing import Final

import discord
from discord import app_commands

from bot.core.money import format_yen
from bot.service.validation import MAX_PROMPT_CHARS

EN: Final = "en"
JA: Final = "ja"

CATALOGUE: Final[dict[str, dict[str, str]]] = {
    EN: {
        # Command and option descriptions (Discord allows DESCRIPTION characters each, bot/core/discord_limits.py).
        "cmd.video": "Make an 8 s 1280x720 video with sound. Costs {price} from the shared budget; takes 1-3 minutes.",
        "cmd.video.prompt": "What the video shows (1 to {max_prompt_chars:,} characters). Each video costs {price}.",
        # With several models, /video names no single price: the model option's choices show each one.
        "cmd.video.several": "Make a short video from the shared budget, at the chosen model's price; takes 1-3 minutes.",
        "cmd.video.prompt.several": "What the video shows (1 to {max_prompt_chars:,} characters). The price depends on the model.",
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
        "error.stopping": "The bot is restarting, so request {ref} was not sent. Nothing was spent ({zero}). "
        "Please try again in a minute.",
        "error.store_unavailable": "The bot cannot record requests right now (its database is unavailable). "
        "Nothing was sent or spent. Please try again later.",
        "error.charged_unusable": "Request {ref} was accepted and charged {price}, but the video service's answer "
        "cannot be used: {reason}. The bot will not follow it. Give support the job id {job_id} and the reference "
        "{ref} for credit.",
        "error.charged_unreadable": "Request {ref} was accepted and charged {price} at {at}, but the video "
        "service's answer could not be read, so the bot cannot follow the video. It will not be resent. For a credit, "
        "give support the reference {ref} and that time.",
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
        "refuse.guild_daily_cap": "This server's daily video budget cannot pay for this video: {left} of {cap} "
        "left. It resets {when}. Nothing was spent.",
        "refuse.guild_monthly_cap": "This server's monthly video budget cannot pay for this video: {left} of {cap} "
        "left. It resets {when}. Nothing was spent.",
        "refuse.member_daily_cap": "Your daily video allowance in this server cannot pay for this video: {left} of "
        "{cap} left. It resets {when}. Nothing was spent.",
        "refuse.member_monthly_cap": "Your monthly video allowance in this server cannot pay for this video: {left} "
        "of {cap} left. It resets {when}. Nothing was spent.",
        "refuse.host_guild_daily_cap": "The daily video budget the bot's host gives each server cannot pay for this "
        "video: {left} of {cap} left here. It resets {when}. Nothing was spent.",
        "refuse.host_guild_monthly_cap": "The monthly video budget the bot's host gives each server cannot pay for "
        "this video: {left} of {cap} left here. It resets {when}. Nothing was spent.",
        "refuse.host_member_daily_cap": "The daily allowance the bot's host gives each member cannot pay for this "
        "video: {left} of {cap} left for you here. It resets {when}. Nothing was spent.",
        "refuse.host_member_monthly_cap": "The monthly allowance the bot's host gives each member cannot pay for "
        "this video: {left} of {cap} left for you here. It resets {when}. Nothing was spent.",
        "refuse.channel": "Videos cannot be requested in this channel. Nothing was spent.",
        "refuse.role": "You need one of these roles to request videos: {roles}. Nothing was spent.",
        "refuse.blocklist": "This prompt contains a term this server does not allow. Nothing was spent.",
        "refuse.member_blocked": "This server's admins have stopped your video requests. Nothing was spent.",
        "refuse.paused": "Video requests are paused by the bot's host for now. Nothing was spent.",
        "refuse.server_not_allowed": "This bot is not enabled for this server. Nothing was spent.",
        "refuse.too_many_offers": "You already have {open} confirmations waiting for a click (the limit is "
        "{limit}). Use or cancel one, or ask again {when}. Nothing was spent.",
        "error.term_empty": "A blocklist term needs some text besides `*`.",
        "error.term_too_long": "A blocklist term can be at most {limit} characters.",
        # /settings (server admins)
        "cmd.settings": "Server admins: this server's video rules (limits, places, blocklist, members, models).",
        "cmd.settings.show": "Show every setting in force here, where it comes from, and the last changes.",
        "cmd.settings.limits": "Change spending caps, the cooldown or jobs in flight, within the host's limits.",
        "cmd.settings.limits.server_daily": "Yen this server may spend per day (0: no cap, if the host sets none).",
        "cmd.settings.limits.server_monthly": "Yen this server may spend per month (0: no cap, if the host sets none).",
        "cmd.settings.limits.member_daily": "Yen one member may spend per day (0: no cap, if the host sets none).",
        "cmd.settings.limits.member_monthly": "Yen one member may spend per month (0: no cap, if the host sets none).",
        "cmd.settings.limits.cooldown": "Seconds a member waits between requests (at least the host's).",
        "cmd.settings.limits.in_flight": "Videos one member may have in progress at once (at most the host's).",
        "cmd.settings.reset": "Put one setting back to the host's default.",
        "cmd.settings.reset.setting": "The setting to put back.",
        "cmd.settings.channels": "Where /video may be used (no channels listed: everywhere).",
        "cmd.settings.roles": "Which roles may use /video (no roles listed: everyone).",
        "cmd.settings.action": "What to do.",
        "cmd.settings.channel": "The channel.",
        "cmd.settings.role": "The role.",
        "cmd.settings.log_channel": "A channel for one line per accepted job, failure, refusal and change.",
        "cmd.settings.log_channel.channel": "The log channel; leave it out to turn the log off.",
        "cmd.settings.blocklist": "Add, remove or list prompt terms that /video refuses (`*` matches anything).",
        "cmd.settings.blocklist.term": "The term: plain text, with `*` as a wildcard.",
        "cmd.settings.member": "Block or unblock a member from /video, or reset their quota window.",
        "cmd.settings.member.member": "The member.",
        "cmd.settings.models": "Which models members may use here, and this server's default.",
        "cmd.settings.models.model": "The model.",
        "cmd.settings.language": "The language of this server's log and alerts.",
        "cmd.settings.language.language": "The language.",
        "cmd.settings.timezone": "The time zone of this server's days and months (its own caps and reports).",
        "cmd.settings.timezone.zone": "An IANA time zone such as Asia/Tokyo.",
        "cmd.settings.budget_alert": "Alert the log channel when the shared budget falls below this (0: off).",
        "cmd.settings.budget_alert.yen": "The threshold in yen (0: off).",
        "choice.add": "add", "choice.remove": "remove", "choice.clear": "clear all", "choice.list": "list",
        "choice.block": "block", "choice.unblock": "unblock", "choice.reset_quota": "reset quota",
        "choice.allow": "allow", "choice.disallow": "disallow", "choice.all": "allow all",
        "choice.default": "make default", "choice.auto": "server's own locale",
        "choice.english": "English", "choice.japanese": "Japanese",
        "setting.guild_daily_cap_yen": "Server daily cap",
        "setting.guild_monthly_cap_yen": "Server monthly cap",
        "setting.member_daily_cap_yen": "Member daily cap",
        "setting.member_monthly_cap_yen": "Member monthly cap",
        "setting.cooldown_seconds": "Cooldown",
        "setting.max_active_jobs": "Jobs in flight per member",
        "setting.allowed_channel_ids": "Channels",
        "setting.allowed_role_ids": "Roles",
        "setting.log_channel_id": "Log channel",
        "setting.allowed_models": "Models",
        "setting.default_model": "Default model",
        "setting.language": "Language",
        "setting.timezone": "Time zone",
        "setting.budget_alert_yen": "Budget alert",
        "setting.reroll_by": "Who may re-roll",
        "setting.confirm_before_spending": "Confirm before spending",
        "setting.value.none": "none", "setting.value.seconds": "{seconds} s",
        "setting.value.every_channel": "every channel", "setting.value.everyone": "everyone",
        "setting.value.off": "off", "setting.value.on": "on", "setting.value.all_models": "all models",
        "setting.value.catalogue_default": "the catalogue's default",
        "setting.value.server_locale": "the server's own locale",
        "setting.value.language.en": "English", "setting.value.language.ja": "Japanese",
        "setting.value.reroll.requester": "the requester only", "setting.value.reroll.anyone": "anyone who may use /video",
        "settings.show.title": "Video settings of this server",
        "settings.show.changes": "Last changes",
        "settings.source.server": "this server", "settings.source.default": "default",
        "settings.source.held": "this server's, held to the host's limit",
        "settings.host.show.at_most": "host's limit: at most {ceiling}",
        "settings.host.show.at_least": "host's limit: at least {ceiling}",
        "settings.host.show.none": "host's limit: none",
        "settings.host.show.zone": "the host's limits count days and months in {zone}",
        "settings.host.refused": "Nothing was changed: the bot's host sets limits that every server keeps to. A server "
                                 "can make them stricter, not looser:",
        "settings.host.at_most": "- {name}: at most {ceiling} (asked: {value})",
        "settings.host.at_least": "- {name}: at least {ceiling} (asked: {value})",
        "settings.unchanged": "Nothing changed: the settings already had those values.",
        "settings.changed": "Changed (in force from the next request):",
        "settings.changed.line": "- {name}: {old} → {new}",
        "settings.reset.none": "{name} was not set here: it already follows the default.",
        "settings.need_target": "Give the {what} to {action}.",
        "settings.blocklist.added": "Added to the blocklist. Prompts that contain it are refused privately.",
        "settings.blocklist.exists": "That term is already on the blocklist.",
        "settings.blocklist.removed": "Removed from the blocklist.",
        "settings.blocklist.missing": "That term is not on the blocklist.",
        "settings.blocklist.full": "The blocklist holds at most {limit} terms.",
        "settings.blocklist.empty": "The blocklist is empty.",
        "settings.blocklist.title": "Blocklist ({count} terms)",
        "settings.member.blocked": "{member} can no longer use /video here. Videos already paid for are still delivered.",
        "settings.member.unblocked": "{member} can use /video here again.",
        "settings.member.reset": "{member}'s quota window for this server's own caps starts again from now.",
        "settings.member.reset.host": "The host's limits still count everything spent today and this month.",
        "settings.models.unknown": "There is no model `{model}` in the catalogue.",
        "settings.timezone.invalid": "`{zone}` is not a time zone; use a name such as Asia/Tokyo or Europe/London.",
        "settings.timezone.host": "This server's own caps and reports count in it; the host's limits keep counting "
        "days and months in {zone}.",
        "error.missing_permission": "Only members with the Manage Server permission can do this.",
        "error.invalid_setting": "That value cannot be used for {name}.",
        # The server's log channel: ids, amounts and reason codes, never prompts or matched terms.
        "log.accepted": "✅ {ref} by {user}: accepted as job `{job_id}`, charged {amount}.",
        "log.failed": "❌ {ref} by {user}: `{code}`, charged {amount}.",
        "log.unknown": "❔ {ref} by {user}: outcome unknown; it may have been charged.",
        "log.refused": "⛔ {user}: refused (`{code}`). Nothing was spent.",
        "log.budget_low": "⚠️ The shared budget is low: {left} left (this server's alert is below {threshold}).",
        "log.setting": "⚙️ {who} changed {name}: {old} → {new} ({when})",
        "log.blocklist_add": "⚙️ {who} added a blocklist term ({when})",
        "log.blocklist_remove": "⚙️ {who} removed a blocklist term ({when})",
        "log.member_block": "⚙️ {who} blocked {member} from /video ({when})",
        "log.member_unblock": "⚙️ {who} unblocked {member} ({when})",
        "log.member_quota_reset": "⚙️ {who} reset {member}'s quota ({when})",
        "log.other": "⚙️ {who} {member} ({when})",
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
        "status.next.failed_unfollowed": "The video service accepted it and charged {price} at {at}, but the bot "
        "could not follow it: {reason}. It will not be resent. For a credit, give support the reference {ref} and "
        "that time.",
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
        "balance.ledger.value": "All time: {all_videos}, {all_yen}\nThis server: {guild_videos}, {guild_yen}",
        # A count of videos: `videos(count, locale)` picks the one or the many.
        "count.video": "{count:,} video",
        "count.videos": "{count:,} videos",
        # Buttons (bot/frontend/buttons.py): on a posted video, on a confirmation, on a request waiting to be sent.
        "state.cancelled": "cancelled",
        "status.next.cancelled": "Its requester cancelled it before it was sent to the video service. Nothing was "
        "spent.",
        "button.reroll": "Re-roll",
        "button.delete": "Delete",
        "button.confirm": "Confirm",
        "button.generate": "Generate",
        "button.cancel": "Cancel",
        "button.unknown": "The bot no longer knows what this button was for. Nothing was spent.",
        "button.not_yours": "This button belongs to another member's request.",
        "reroll.offer": "Re-roll {ref} with the same prompt and a new random seed? Model: {model} · Cost: {price} "
        "from the shared budget. Confirm {when}, or ignore this.",
        "reroll.not_allowed": "In this server only the member who asked for this video can re-roll it. Nothing was "
        "spent.",
        "reroll.prompt_erased": "The prompt of {ref} was erased under the bot's retention rules, so it cannot be "
        "re-rolled. Nothing was spent.",
        "spend.not_member": "You are no longer a member of the server this was made in, so this button cannot spend "
        "there. Nothing was spent.",
        "spend.video_denied": "This server's settings (Server Settings → Integrations) do not let you use /video "
        "there, and this button spends as /video does. Nothing was spent.",
        "spend.standing_unreadable": "Discord could not tell the bot just now whether you may use /video there. "
        "Nothing was spent; try again in a moment.",
        "confirm.offer": "Make this video? Model: {model} · Cost: {price} from the shared budget.\n> {prompt}\n"
        "Nothing is sent or spent until you click Generate, {when} at the latest.",
        "offer.cancelled": "Cancelled. Nothing was sent or spent.",
        "offer.expired": "This offer expired. Nothing was sent or spent; ask again if you still want the video.",
        "offer.already": "This was already started or cancelled by an earlier click. Nothing more was spent.",
        "offer.starting": "Starting…",
        "delete.done": "The video post was deleted. The request stays in the bot's ledger.",
        "delete.refused": "Only the member who asked for this video, or a member with Manage Messages, can delete "
        "it.",
        "cancel.waiting": "Request {ref} is waiting for the bot's turn to send it to the video service. Until it is "
        "sent you can cancel it; nothing is spent before then.",
        "cancel.done": "Request {ref} was cancelled before it was sent. Nothing was spent.",
        "cancel.too_late": "Request {ref} was already sent to the video service, which cannot cancel a job, so it "
        "goes on; it will be posted as usual.",
        "cancel.ended": "Request {ref} is no longer waiting ({state}); there is nothing to cancel.",
        "video.field.queue": "Place in line",
        "video.queue": "{position:,} of this bot's waiting jobs",
        "video.field.eta": "Expected ready",
        "video.updates": "This message is updated until {when}; after that, use `/status {ref}`.",
        "cmd.settings.reroll": "Who may re-roll a posted video: its requester only, or anyone who may use /video.",
        "cmd.settings.reroll.who": "The requester only, or anyone allowed to use /video here.",
        "cmd.settings.confirm": "Whether /video shows the price and waits for a click on Generate before spending.",
        "cmd.settings.confirm.enabled": "On: /video asks for Generate first. Off: it starts at once.",
        # Worker messages in the channel (or DM)
        "deliver.done": "{mention} your video {ref} is ready.\n> {prompt}\nSeed: {seed} · Model: {model} · Job: "
        "`{job_id}` · Cost: {price}",
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
        "deliver.charge_unrecorded": "{mention} your video request {ref} was accepted and charged {price} at {at}, "
        "but the bot could not record that charge, so its records (and `/status {ref}`) may say its outcome is "
        "unknown. It was charged, and will not be resent. For a credit, give support the reference {ref} and that "
        "time.",
        "deliver.slow": "{mention} your video {ref} is taking unusually long (over {minutes} minutes). The bot keeps "
        "checking; nothing is lost.",
        "deliver.stalled": "{mention} your video {ref} did not finish within {hours} hours, so the bot stopped "
        "checking it. Give support the job id {job_id}.",
        "deliver.accepted_late": "{mention} your video request {ref} was accepted by the video service after all "
        "(job {job_id}, charged {price}): the earlier message that its outcome was unknown no longer holds. The video "
        "will be posted here when it is ready.",
        "deliver.unknown": "{mention} your video request {ref} was being sent when the bot stopped, so it cannot "
        "tell whether the video service accepted it (and charged {price}). It will not be resent automatically. "
        "Check `/status {ref}` before asking again.",
        # /usage and /credit
        "cmd.usage": "This server's spending for a period: per member, failed jobs (yours only without Manage "
        "Server).",
        "cmd.usage.period": "Which period: today, this month (the default) or last month.",
        "cmd.usage.csv": "Also attach every job of the period as a CSV file.",
        "cmd.credit": "Mark a failed job credited once the video service's support refunded it (Manage Server).",
        "cmd.credit.job": "The request reference such as #42, or the service's job id.",
        "usage.period.today": "Today",
        "usage.period.this_month": "This month",
        "usage.period.last_month": "Last month",
        "usage.title.server": "Usage in this server: {period}",
        "usage.title.own": "Your usage in this server: {period}",
        "usage.window": "From {start} to {end}",
        "usage.none": "No charged requests in this period.",
        "usage.members": "**Per member**",
        "usage.member.line": "{member} · {accepted:,} accepted · {failed:,} failed · {unknown:,} unknown · {spent}",
        "usage.more": "…and {count:,} more: the CSV has them all (`/usage csv:True`).",
        "usage.field.accepted": "Accepted",
        "usage.field.failed": "Failed",
        "usage.field.unknown": "Outcome unknown",
        "usage.field.spent": "Spent (ledger)",
        "usage.field.credited": "Credited by support",
        "usage.field.net": "Net",
        "usage.field.failed_jobs": "Failed jobs (reference · job id · cost · reason)",
        "usage.failed.credited": "credited {when}",
        "usage.footer.server": "From the bot's ledger. Once support refunds a failed job, mark it with /credit.",
        "usage.footer.own": "From the bot's ledger.",
        "usage.footer.unknown": "{count:,} with an unknown outcome may have been charged without being in the "
        "ledger; compare /balance.",
        "usage.csv.too_big": "The CSV ({size:,} bytes) is larger than Discord lets the bot attach here ({limit:,} "
        "bytes). Choose a shorter period.",
        "credit.done": "Request {ref} (job {job_id}, {price}) is marked credited. The ledger keeps the charge; "
        "reports show it as credited. It no longer counts against this server's own caps.",
        "credit.done.host": "The host's limits still count it.",
        "credit.not_found": "No request `{reference}` was found in this server. Nothing was changed.",
        "credit.not_failed": "Request {ref} is {state}: only a failed, charged job can be marked credited. Nothing "
        "was changed.",
        "credit.already_credited": "Request {ref} was already marked credited {when} by {member}. Nothing was "
        "changed.",
    },
    JA: {
        "cmd.video": "8秒・1280x720・音声付きの動画を作ります。共有予算から{price}、1〜3分かかります。",
        "cmd.video.prompt": "動画の内容（1〜{max_prompt_chars:,}文字）。1本{price}です。",
        "cmd.video.several": "共有予算で短い動画を作ります。料金は選んだモデルによります。1〜3分かかります。",
        "cmd.video.prompt.several": "動画の内容（1〜{max_prompt_chars:,}文字）。料金はモデルによります。",
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
        "error.stopping": "ボットが再起動中のため、リクエスト {ref} は送信していません。費用はかかっていません（{zero}）。"
        "少し待ってからもう一度お試しください。",
        "error.store_unavailable": "ボットは今リクエストを記録できません（データベースが使えません）。送信も課金もしていません。"
        "後でもう一度お試しください。",
        "error.charged_unusable": "リクエスト {ref} は受け付けられ{price}が課金されましたが、動画サービスの応答が使えません：{reason}。"
        "ボットは追跡しません。ジョブID {job_id} と参照 {ref} をサポートに伝えてクレジットを受けてください。",
        "error.charged_unreadable": "リクエスト {ref} は{at}に受け付けられ{price}が課金されましたが、動画サービスの"
        "応答を読み取れなかったため、ボットは動画を追跡できません。再送はしません。クレジットを受けるには、参照 {ref} と"
        "この時刻をサポートに伝えてください。",
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
        "refuse.guild_daily_cap": "このサーバーの今日の動画予算では足りません（{cap}中、残り{left}）。{when}にリセット"
        "されます。費用はかかっていません。",
        "refuse.guild_monthly_cap": "このサーバーの今月の動画予算では足りません（{cap}中、残り{left}）。{when}に"
        "リセットされます。費用はかかっていません。",
        "refuse.member_daily_cap": "このサーバーでのあなたの今日の利用枠では足りません（{cap}中、残り{left}）。{when}に"
        "リセットされます。費用はかかっていません。",
        "refuse.member_monthly_cap": "このサーバーでのあなたの今月の利用枠では足りません（{cap}中、残り{left}）。"
        "{when}にリセットされます。費用はかかっていません。",
        "refuse.host_guild_daily_cap": "ボットの運営者が各サーバーに設けた1日の動画予算では足りません（{cap}中、"
        "このサーバーの残り{left}）。{when}にリセットされます。費用はかかっていません。",
        "refuse.host_guild_monthly_cap": "ボットの運営者が各サーバーに設けた1か月の動画予算では足りません（{cap}中、"
        "このサーバーの残り{left}）。{when}にリセットされます。費用はかかっていません。",
        "refuse.host_member_daily_cap": "ボットの運営者が各メンバーに設けた1日の利用枠では足りません（{cap}中、"
        "このサーバーでのあなたの残り{left}）。{when}にリセットされます。費用はかかっていません。",
        "refuse.host_member_monthly_cap": "ボットの運営者が各メンバーに設けた1か月の利用枠では足りません（{cap}中、"
        "このサーバーでのあなたの残り{left}）。{when}にリセットされます。費用はかかっていません。",
        "refuse.channel": "このチャンネルでは動画をリクエストできません。費用はかかっていません。",
        "refuse.role": "動画をリクエストするには次のいずれかのロールが必要です：{roles}。費用はかかっていません。",
        "refuse.blocklist": "このプロンプトには、このサーバーで許可されていない語句が含まれています。費用はかかっていません。",
        "refuse.member_blocked": "このサーバーの管理者により、あなたの動画リクエストは停止されています。"
        "費用はかかっていません。",
        "refuse.paused": "ボットの運営者により、動画リクエストは現在一時停止中です。費用はかかっていません。",
        "refuse.server_not_allowed": "このサーバーではこのボットを利用できません。費用はかかっていません。",
        "refuse.too_many_offers": "クリック待ちの確認がすでに{open}件あります（上限{limit}件）。どれかを使うか"
        "キャンセルするか、{when}にもう一度どうぞ。費用はかかっていません。",
        "error.term_empty": "ブロックリストの語句には `*` 以外の文字が必要です。",
        "error.term_too_long": "ブロックリストの語句は{limit}文字までです。",
        "cmd.settings": "サーバー管理者向け：このサーバーの動画ルール（上限・場所・ブロックリスト・メンバー・モデル）。",
        "cmd.settings.show": "有効な設定とその出どころ、最近の変更を表示します。",
        "cmd.settings.limits": "支出上限・クールダウン・同時進行数を、運営者の上限の範囲で変更します。",
        "cmd.settings.limits.server_daily": "このサーバーの1日の上限（円、運営者が上限を決めていなければ0で上限なし）。",
        "cmd.settings.limits.server_monthly": "このサーバーの1か月の上限（円、運営者が上限を決めていなければ0で上限なし）。",
        "cmd.settings.limits.member_daily": "メンバー1人の1日の上限（円、運営者が上限を決めていなければ0で上限なし）。",
        "cmd.settings.limits.member_monthly": "メンバー1人の1か月の上限（円、運営者が上限を決めていなければ0で上限なし）。",
        "cmd.settings.limits.cooldown": "リクエストの間隔（秒、運営者の値以上）。",
        "cmd.settings.limits.in_flight": "メンバー1人が同時に進行できる動画の数（運営者の値以下）。",
        "cmd.settings.reset": "設定を1つ、運営者の既定値に戻します。",
        "cmd.settings.reset.setting": "戻す設定。",
        "cmd.settings.channels": "/video を使えるチャンネル（未指定ならどこでも）。",
        "cmd.settings.roles": "/video を使えるロール（未指定なら全員）。",
        "cmd.settings.action": "操作。",
        "cmd.settings.channel": "チャンネル。",
        "cmd.settings.role": "ロール。",
        "cmd.settings.log_channel": "受付・失敗・拒否・設定変更を1行ずつ記録するチャンネル。",
        "cmd.settings.log_channel.channel": "ログチャンネル。省略するとログを止めます。",
        "cmd.settings.blocklist": "/video が拒否する語句の追加・削除・一覧（`*` は任意の文字列）。",
        "cmd.settings.blocklist.term": "語句（`*` をワイルドカードに使えます）。",
        "cmd.settings.member": "メンバーの /video を停止・再開、または利用枠をリセットします。",
        "cmd.settings.member.member": "メンバー。",
        "cmd.settings.models": "このサーバーで使えるモデルと既定のモデル。",
        "cmd.settings.models.model": "モデル。",
        "cmd.settings.language": "このサーバーのログと通知の言語。",
        "cmd.settings.language.language": "言語。",
        "cmd.settings.timezone": "このサーバーの日と月の区切り（独自の上限とレポート）のタイムゾーン。",
        "cmd.settings.timezone.zone": "Asia/Tokyo のようなIANAタイムゾーン名。",
        "cmd.settings.budget_alert": "共有予算がこの額を下回ったらログチャンネルに通知します（0で無効）。",
        "cmd.settings.budget_alert.yen": "しきい値（円、0で無効）。",
        "choice.add": "追加", "choice.remove": "削除", "choice.clear": "すべて解除", "choice.list": "一覧",
        "choice.block": "停止", "choice.unblock": "再開", "choice.reset_quota": "利用枠をリセット",
        "choice.allow": "許可", "choice.disallow": "不許可", "choice.all": "すべて許可",
        "choice.default": "既定にする", "choice.auto": "サーバーのロケール",
        "choice.english": "英語", "choice.japanese": "日本語",
        "setting.guild_daily_cap_yen": "サーバーの1日の上限",
        "setting.guild_monthly_cap_yen": "サーバーの1か月の上限",
        "setting.member_daily_cap_yen": "メンバーの1日の上限",
        "setting.member_monthly_cap_yen": "メンバーの1か月の上限",
        "setting.cooldown_seconds": "クールダウン",
        "setting.max_active_jobs": "メンバーの同時進行数",
        "setting.allowed_channel_ids": "チャンネル",
        "setting.allowed_role_ids": "ロール",
        "setting.log_channel_id": "ログチャンネル",
        "setting.allowed_models": "モデル",
        "setting.default_model": "既定のモデル",
        "setting.language": "言語",
        "setting.timezone": "タイムゾーン",
        "setting.budget_alert_yen": "予算アラート",
        "setting.reroll_by": "再生成できる人",
        "setting.confirm_before_spending": "支払い前の確認",
        "setting.value.none": "なし", "setting.value.seconds": "{seconds}秒",
        "setting.value.every_channel": "すべてのチャンネル", "setting.value.everyone": "全員",
        "setting.value.off": "オフ", "setting.value.on": "オン", "setting.value.all_models": "すべてのモデル",
        "setting.value.catalogue_default": "カタログの既定",
        "setting.value.server_locale": "サーバーのロケール",
        "setting.value.language.en": "英語", "setting.value.language.ja": "日本語",
        "setting.value.reroll.requester": "リクエストした本人のみ", "setting.value.reroll.anyone": "/video を使える全員",
        "settings.show.title": "このサーバーの動画設定",
        "settings.show.changes": "最近の変更",
        "settings.source.server": "このサーバー", "settings.source.default": "既定",
        "settings.source.held": "このサーバーの値（運営者の上限に合わせています）",
        "settings.host.show.at_most": "運営者の上限：{ceiling}以下",
        "settings.host.show.at_least": "運営者の下限：{ceiling}以上",
        "settings.host.show.none": "運営者の上限：なし",
        "settings.host.show.zone": "運営者の上限は{zone}の日・月で数えます",
        "settings.host.refused": "変更していません。ボットの運営者が全サーバー共通の上限を決めています。サーバーは"
                                 "それより厳しくはできますが、緩めることはできません：",
        "settings.host.at_most": "- {name}：{ceiling}以下（指定：{value}）",
        "settings.host.at_least": "- {name}：{ceiling}以上（指定：{value}）",
        "settings.unchanged": "変更はありません（すでにその値です）。",
        "settings.changed": "変更しました（次のリクエストから有効）：",
        "settings.changed.line": "- {name}：{old} → {new}",
        "settings.reset.none": "{name}はこのサーバーで設定されていません（既定値のままです）。",
        "settings.need_target": "{action}する{what}を指定してください。",
        "settings.blocklist.added": "ブロックリストに追加しました。含むプロンプトは非公開で拒否されます。",
        "settings.blocklist.exists": "その語句はすでにブロックリストにあります。",
        "settings.blocklist.removed": "ブロックリストから削除しました。",
        "settings.blocklist.missing": "その語句はブロックリストにありません。",
        "settings.blocklist.full": "ブロックリストは{limit}語までです。",
        "settings.blocklist.empty": "ブロックリストは空です。",
        "settings.blocklist.title": "ブロックリスト（{count}語）",
        "settings.member.blocked": "{member} はこのサーバーで /video を使えなくなりました。支払い済みの動画は届けられます。",
        "settings.member.unblocked": "{member} はこのサーバーで再び /video を使えます。",
        "settings.member.reset": "{member} の利用枠（このサーバー独自の上限）を今からリセットしました。",
        "settings.member.reset.host": "運営者の上限は今日・今月の利用をすべて数え続けます。",
        "settings.models.unknown": "カタログにモデル `{model}` はありません。",
        "settings.timezone.invalid": "`{zone}` はタイムゾーンではありません。Asia/Tokyo のような名前を使ってください。",
        "settings.timezone.host": "このサーバー独自の上限とレポートはこのタイムゾーンで数えます。運営者の上限は引き続き"
        "{zone}の日・月で数えます。",
        "error.missing_permission": "これは「サーバー管理」権限を持つメンバーだけが実行できます。",
        "error.invalid_setting": "その値は{name}に使えません。",
        "log.accepted": "✅ {ref}（{user}）：ジョブ `{job_id}` として受付、{amount}課金。",
        "log.failed": "❌ {ref}（{user}）：`{code}`、{amount}課金済み。",
        "log.unknown": "❔ {ref}（{user}）：結果不明。課金された可能性があります。",
        "log.refused": "⛔ {user}：拒否（`{code}`）。費用はかかっていません。",
        "log.budget_low": "⚠️ 共有予算が少なくなっています：残り{left}（このサーバーの通知しきい値は{threshold}）。",
        "log.setting": "⚙️ {who} が{name}を変更：{old} → {new}（{when}）",
        "log.blocklist_add": "⚙️ {who} がブロックリストに語句を追加（{when}）",
        "log.blocklist_remove": "⚙️ {who} がブロックリストから語句を削除（{when}）",
        "log.member_block": "⚙️ {who} が {member} の /video を停止（{when}）",
        "log.member_unblock": "⚙️ {who} が {member} の停止を解除（{when}）",
        "log.member_quota_reset": "⚙️ {who} が {member} の利用枠をリセット（{when}）",
        "log.other": "⚙️ {who} {member}（{when}）",
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
        "status.next.failed_unfollowed": "{at}に動画サービスが受け付け{price}が課金されましたが、ボットは追跡できません："
        "{reason}。再送はしません。クレジットを受けるには、参照 {ref} とこの時刻をサポートに伝えてください。",
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
        "balance.ledger.value": "累計: {all_videos}、{all_yen}\nこのサーバー: {guild_videos}、{guild_yen}",
        "count.video": "{count:,}本",
        "count.videos": "{count:,}本",
        "state.cancelled": "キャンセル済み",
        "status.next.cancelled": "動画サービスに送る前にリクエストした本人がキャンセルしました。費用はかかっていません。",
        "button.reroll": "再生成",
        "button.delete": "削除",
        "button.confirm": "確定",
        "button.generate": "生成する",
        "button.cancel": "キャンセル",
        "button.unknown": "このボタンが何のためのものか、ボットにはもう分かりません。費用はかかっていません。",
        "button.not_yours": "このボタンは別のメンバーのリクエストのものです。",
        "reroll.offer": "{ref} を同じプロンプトと新しいランダムなシードで再生成しますか？ モデル: {model} · 費用: 共有予算から{price}。"
        "{when}までに確定してください（不要ならそのままで構いません）。",
        "reroll.not_allowed": "このサーバーでは、動画をリクエストした本人だけが再生成できます。費用はかかっていません。",
        "reroll.prompt_erased": "{ref} のプロンプトは保存期間のルールにより消去済みのため、再生成できません。費用はかかっていません。",
        "spend.not_member": "この動画が作られたサーバーのメンバーではなくなったため、このボタンでは費用を使えません。"
        "費用はかかっていません。",
        "spend.video_denied": "このサーバーの設定（サーバー設定 → 連携サービス）で、あなたはそこで /video を使えません。"
        "このボタンも /video と同じ扱いです。費用はかかっていません。",
        "spend.standing_unreadable": "そこで /video を使えるかどうか、今は Discord から確認できませんでした。"
        "費用はかかっていません。しばらくしてからもう一度お試しください。",
        "confirm.offer": "この動画を作りますか？ モデル: {model} · 費用: 共有予算から{price}。\n> {prompt}\n"
        "「生成する」を押すまで送信も課金もしません（期限: {when}）。",
        "offer.cancelled": "キャンセルしました。送信も課金もしていません。",
        "offer.expired": "期限が切れました。送信も課金もしていません。必要ならもう一度リクエストしてください。",
        "offer.already": "先のクリックですでに開始またはキャンセルされています。追加の費用はかかっていません。",
        "offer.starting": "開始しています…",
        "delete.done": "動画の投稿を削除しました。リクエストはボットの記録に残ります。",
        "delete.refused": "この動画を削除できるのは、リクエストした本人か「メッセージの管理」権限を持つメンバーだけです。",
        "cancel.waiting": "リクエスト {ref} は、ボットが動画サービスに送る順番を待っています。送信されるまではキャンセルでき、"
        "それまで費用はかかりません。",
        "cancel.done": "リクエスト {ref} を送信前にキャンセルしました。費用はかかっていません。",
        "cancel.too_late": "リクエスト {ref} はすでに動画サービスに送信されました。サービスにはキャンセル機能がないため、"
        "このまま進み、いつも通り投稿されます。",
        "cancel.ended": "リクエスト {ref} はもう待機中ではありません（{state}）。キャンセルするものはありません。",
        "video.field.queue": "順番",
        "video.queue": "このボットの待機中ジョブのうち{position:,}番目",
        "video.field.eta": "完成予定",
        "video.updates": "このメッセージは{when}まで更新されます。その後は `/status {ref}` で確認してください。",
        "cmd.settings.reroll": "投稿された動画を再生成できる人: リクエストした本人のみ、または /video を使える全員。",
        "cmd.settings.reroll.who": "リクエストした本人のみ、またはここで /video を使える全員。",
        "cmd.settings.confirm": "/video が費用を表示し、「生成する」が押されるまで支払いを待つかどうか。",
        "cmd.settings.confirm.enabled": "オン: /video はまず「生成する」を求めます。オフ: すぐに開始します。",
        "deliver.done": "{mention} 動画 {ref} ができました。\n> {prompt}\nシード: {seed} · モデル: {model} · ジョブ: "
        "`{job_id}` · 費用: {price}",
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
        "deliver.charge_unrecorded": "{mention} 動画リクエスト {ref} は{at}に受け付けられ{price}が課金されましたが、"
        "ボットはその課金を記録できませんでした。そのため記録（`/status {ref}`）では結果が分からないと表示されることが"
        "あります。課金は済んでおり、再送はしません。クレジットを受けるには、参照 {ref} とこの時刻をサポートに伝えてください。",
        "deliver.slow": "{mention} 動画 {ref} にいつもより時間がかかっています（{minutes}分以上）。確認を続けています。"
        "失われることはありません。",
        "deliver.stalled": "{mention} 動画 {ref} は{hours}時間以内に完成しなかったため、確認を止めました。"
        "サポートにジョブID {job_id} を伝えてください。",
        "deliver.accepted_late": "{mention} 動画リクエスト {ref} は結局、動画サービスに受け付けられました（ジョブ {job_id}、"
        "{price}課金済み）。先にお伝えした「結果が分からない」はもう当てはまりません。動画はできしだいここに投稿します。",
        "deliver.unknown": "{mention} 動画リクエスト {ref} の送信中にボットが停止したため、動画サービスが受け付けて"
        "{price}を課金したかどうか分かりません。自動では再送しません。もう一度頼む前に `/status {ref}` で確認してください。",
        "cmd.usage": "期間ごとのこのサーバーの使用額（メンバー別・失敗したジョブ）。サーバー管理権限がなければ自分の分のみ。",
        "cmd.usage.period": "期間: 今日、今月（既定）、先月。",
        "cmd.usage.csv": "期間内の全ジョブをCSVファイルで添付します。",
        "cmd.credit": "失敗したジョブを、動画サービスのサポートが返金した後に返金済みにします（サーバー管理）。",
        "cmd.credit.job": "#42 のような受付番号、またはサービスのジョブID。",
        "usage.period.today": "今日",
        "usage.period.this_month": "今月",
        "usage.period.last_month": "先月",
        "usage.title.server": "このサーバーの使用状況: {period}",
        "usage.title.own": "このサーバーでのあなたの使用状況: {period}",
        "usage.window": "{start}から{end}まで",
        "usage.none": "この期間に課金されたリクエストはありません。",
        "usage.members": "**メンバー別**",
        "usage.member.line": "{member} · 受付{accepted:,}件 · 失敗{failed:,}件 · 結果不明{unknown:,}件 · {spent}",
        "usage.more": "…ほか{count:,}件。すべてはCSVにあります（`/usage csv:True`）。",
        "usage.field.accepted": "受付",
        "usage.field.failed": "失敗",
        "usage.field.unknown": "結果不明",
        "usage.field.spent": "使用額（記録）",
        "usage.field.credited": "サポートによる返金",
        "usage.field.net": "差引",
        "usage.field.failed_jobs": "失敗したジョブ（受付番号 · ジョブID · 費用 · 理由）",
        "usage.failed.credited": "返金済み（{when}）",
        "usage.footer.server": "ボットの記録による数値です。サポートが失敗したジョブを返金したら /credit で記録してください。",
        "usage.footer.own": "ボットの記録による数値です。",
        "usage.footer.unknown": "結果不明の{count:,}件は、記録にないまま課金された可能性があります。/balance と比べてください。",
        "usage.csv.too_big": "CSV（{size:,}バイト）は、ここでDiscordが添付を許す大きさ（{limit:,}バイト）を超えています。"
        "短い期間を選んでください。",
        "credit.done": "リクエスト {ref}（ジョブ {job_id}、{price}）を返金済みにしました。課金の記録はそのまま残り、"
        "集計では返金済みと表示されます。このサーバー独自の上限には数えなくなります。",
        "credit.done.host": "運営者の上限には引き続き数えます。",
        "credit.not_found": "このサーバーにリクエスト `{reference}` は見つかりません。何も変更していません。",
        "credit.not_failed": "リクエスト {ref} は「{state}」です。返金済みにできるのは、失敗して課金されたジョブだけです。"
        "何も変更していません。",
        "credit.already_credited": "リクエスト {ref} は{when}に{member}が返金済みにしています。何も変更していません。",
    },
}


def language(locale: str | discord.Locale | None) -> str:
    """`ja` for Japanese clients, `en` for everyone else."""
    value = locale.value if isinstance(locale, discord.Locale) else (locale or "")
    return JA if value.lower().startswith("ja") else EN


def t(locale: str | discord.Locale | None, key: str, **params: object) -> str:
    """The text for `key` in the locale's language, filled with `params`."""
    return CATALOGUE[language(locale)][key].format(**params)


def videos(count: int, locale: str | discord.Locale | None) -> str:
    """`1 video`, `2 videos` (`1本`, `2本`)."""
    return t(locale, "count.video" if count == 1 else "count.videos", count=count)


def yen(amount: int, locale: str | discord.Locale | None) -> str:
    if language(locale) == JA:
        return f"{amount:,}円"
    return format_yen(amount)


def description(locale: str | discord.Locale | None, key: str, price_yen: int | None = None,
                name: str | None = None) -> str:
    """A command or option description (or a choice's name); `{price}` is filled in the locale's own currency
    format, `{name}` as given; `{max_prompt_chars}` is the video service's prompt limit."""
    params: dict[str, object] = {"max_prompt_chars": MAX_PROMPT_CHARS}
    if price_yen is not None:
        params["price"] = yen(price_yen, locale)
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
