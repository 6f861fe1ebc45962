"""Mutations, one per module."""

import strawberry

from .approve_tool_call import approve_tool_call
from .decide_tool_calls import decide_tool_calls
from .decline_tool_call import decline_tool_call
from .resume_run import resume_run
from .retry_run import retry_run
from .review_claims import claim_review, release_review
from .start_run import start_run


@strawberry.type
class Mutation:
    start_run = start_run
    approve_tool_call = approve_tool_call
    decline_tool_call = decline_tool_call
    resume_run = resume_run
    retry_run = retry_run
    decide_tool_calls = decide_tool_calls
    claim_review = claim_review
    release_review = release_review


__all__ = ["Mutation"]
