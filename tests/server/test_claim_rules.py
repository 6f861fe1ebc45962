"""Who may claim a review, and how long a claim lasts (issue 45 sections 2 and 4), over HTTP.

``claimReview`` is refused, with the refusal the gate gives that principal's decision, to anyone
the gate would not let decide the question (separation of duties, a rule's scope, the run's
resources): a claim never blocks those who may decide. An approval that does not yet complete a
two-person call ends its approver's own review claim in the approval's write, so the second
approver may claim it at once. On the memory, SQLite and MongoDB stores.
"""

from __future__ import annotations

from typing import Any

from runtime.demo import LEDGER

from .._auth import ALL, TestKey
from .._graphql import REFUND, REFUND_PROMPT, GraphQLClient
from .conftest import Serve

ALICE = TestKey("alice", "rg_test_alice_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
BOB = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyz")
"""May decide, but lacks ``refunds:approve``."""
CAROL = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
GINA = TestKey("gina", "rg_test_gina_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
ELSEWHERE = TestKey("elsewhere", "rg_test_elsewhere_0123456789abcdefghijklmnopqrs", resources=("customer-8",))

ANSWER = """
  __typename
  ... on UserError { code message }
  ... on ReviewClaimed { reviewClaim { by } }
  ... on ReviewAlreadyClaimed { reviewClaim { by } }
"""
REFUSALS = "... on Forbidden { requiredScope } ... on SeparationOfDuties { startedBy }"
CLAIM = f"mutation($input: ReviewClaimInput!) {{ claimReview(input: $input) {{ {ANSWER} }} }}"
CLAIM_REFUSED = f"mutation($input: ReviewClaimInput!) {{ claimReview(input: $input) {{ {ANSWER} {REFUSALS} }} }}"
RELEASE = f"mutation($input: ReviewClaimInput!) {{ releaseReview(input: $input) {{ {ANSWER} }} }}"
APPROVE = """
mutation($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) {
    __typename ... on UserError { code message } ... on RunOutcome { status }
  }
}"""
START = """
mutation($input: StartRunInput!) {
  startRun(input: $input) { ... on RunOutcome { runId status run { toolCalls { toolCallId questionId } } } }
}"""
REVIEW_CLAIM = """
query($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) { toolCalls { approvals { decidedBy } } }
  reviewQueue { nodes { runId reviewClaim { by } } }
}"""


async def waiting(gql: GraphQLClient, **fields: Any) -> dict[str, str]:
    """Start a refund run as ``gql``'s principal; the question it waits on, as a claim names it."""
    run = (await gql.data(START, input={"agentId": REFUND, "prompt": REFUND_PROMPT, **fields}))["startRun"]
    assert run["status"] == "SUSPENDED", run
    call = run["run"]["toolCalls"][0]
    return {
        "agentId": REFUND,
        "runId": run["runId"],
        "toolCallId": call["toolCallId"],
        "questionId": call["questionId"],
    }


async def test_the_requester_may_not_claim_what_separation_of_duties_keeps_it_from_approving(serve: Serve) -> None:
    rules = [{"tool": "issue_refund", "separationOfDuties": True, "requireReviewClaim": True}]
    served = await serve(keys=[ALICE, CAROL], tool_rules=rules)
    alice, carol = served.client(ALICE), served.client(CAROL)
    question = await waiting(alice)

    refused = (await alice.data(CLAIM_REFUSED, input=question))["claimReview"]

    assert (refused["__typename"], refused["code"]) == ("SeparationOfDuties", "SEPARATION_OF_DUTIES"), refused
    assert refused["startedBy"] == f"key:{ALICE.name}"
    claimed = (await carol.data(CLAIM, input=question))["claimReview"]
    assert (claimed["__typename"], claimed["reviewClaim"]["by"]) == ("ReviewClaimed", f"key:{CAROL.name}"), claimed
    approved = (await carol.data(APPROVE, input=question))["approveToolCall"]
    assert (approved["__typename"], approved["status"]) == ("RunOutcome", "COMPLETED"), approved
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_a_principal_without_the_rules_scope_may_not_claim_the_question(serve: Serve) -> None:
    rules = [{"tool": "issue_refund", "scope": "refunds:approve", "requireReviewClaim": True}]
    served = await serve(keys=[BOB, GINA, ELSEWHERE], tool_rules=rules)
    admin, bob, gina = served.client(), served.client(BOB), served.client(GINA)
    question = await waiting(admin, resourceId="customer-7")

    refused = (await bob.data(CLAIM_REFUSED, input=question))["claimReview"]
    elsewhere = (await served.client(ELSEWHERE).data(CLAIM_REFUSED, input=question))["claimReview"]

    assert (refused["__typename"], refused["requiredScope"]) == ("Forbidden", "refunds:approve"), refused
    assert elsewhere["__typename"] == "RunNotFound", elsewhere
    claimed = (await gina.data(CLAIM, input=question))["claimReview"]
    assert claimed["__typename"] == "ReviewClaimed", claimed
    approved = (await gina.data(APPROVE, input=question))["approveToolCall"]
    assert (approved["__typename"], approved["status"]) == ("RunOutcome", "COMPLETED"), approved


async def test_a_first_of_two_approvals_ends_its_approvers_review_claim(serve: Serve) -> None:
    rules = [{"tool": "issue_refund", "approvals": 2, "requireReviewClaim": True}]
    served = await serve(keys=[ALICE, CAROL, GINA], tool_rules=rules)
    alice, carol, gina = served.client(ALICE), served.client(CAROL), served.client(GINA)
    question = await waiting(served.client())
    # gina's claim on another question stays as it is
    other = await waiting(served.client())
    assert (await gina.data(CLAIM, input=other))["claimReview"]["__typename"] == "ReviewClaimed"

    assert (await alice.data(CLAIM, input=question))["claimReview"]["__typename"] == "ReviewClaimed"
    first = (await alice.data(APPROVE, input=question))["approveToolCall"]
    assert (first["__typename"], first["status"]) == ("RunOutcome", "SUSPENDED"), first

    # the approval's own write ended alice's claim: carol claims and approves at once
    shown = await carol.data(REVIEW_CLAIM, agentId=REFUND, runId=question["runId"])
    assert shown["suspendedRun"]["toolCalls"][0]["approvals"] == [{"decidedBy": f"key:{ALICE.name}"}]
    claims = {node["runId"]: node["reviewClaim"] for node in shown["reviewQueue"]["nodes"]}
    assert claims == {question["runId"]: None, other["runId"]: {"by": f"key:{GINA.name}"}}
    not_held = (await alice.data(RELEASE, input=question))["releaseReview"]
    assert not_held["__typename"] == "ReviewClaimNotHeld", not_held
    claimed = (await carol.data(CLAIM, input=question))["claimReview"]
    assert claimed["__typename"] == "ReviewClaimed", claimed
    second = (await carol.data(APPROVE, input=question))["approveToolCall"]
    assert (second["__typename"], second["status"]) == ("RunOutcome", "COMPLETED"), second


QUEUE = "query { reviewQueue { totalCount nodes { runId } } }"
CLAIM_OR_DUPLICATE = (
    "mutation($input: ReviewClaimInput!) { claimReview(input: $input) { "
    f"{ANSWER} ... on DuplicateApprover {{ approvalsRequired }} }} }}"
)


async def test_an_approver_who_already_approved_may_not_claim_nor_list_the_question(serve: Serve) -> None:
    rules = [{"tool": "issue_refund", "approvals": 2, "requireReviewClaim": True}]
    served = await serve(keys=[ALICE, CAROL, GINA], tool_rules=rules)
    alice, carol, gina = served.client(ALICE), served.client(CAROL), served.client(GINA)
    question = await waiting(alice)
    assert (await carol.data(CLAIM, input=question))["claimReview"]["__typename"] == "ReviewClaimed"
    first = (await carol.data(APPROVE, input=question))["approveToolCall"]
    assert (first["__typename"], first["status"]) == ("RunOutcome", "SUSPENDED"), first

    again = (await carol.data(CLAIM_OR_DUPLICATE, input=question))["claimReview"]

    assert (again["__typename"], again["code"]) == ("DuplicateApprover", "DUPLICATE_APPROVER"), again
    assert again["approvalsRequired"] == 2
    # the gate's refusal is the queue's rule: carol's queue no longer lists what she may not approve
    assert (await carol.data(QUEUE))["reviewQueue"] == {"totalCount": 0, "nodes": []}
    listed = (await gina.data(QUEUE))["reviewQueue"]
    assert listed == {"totalCount": 1, "nodes": [{"runId": question["runId"]}]}, listed
    claimed = (await gina.data(CLAIM, input=question))["claimReview"]
    assert (claimed["__typename"], claimed["reviewClaim"]["by"]) == ("ReviewClaimed", f"key:{GINA.name}"), claimed
    second = (await gina.data(APPROVE, input=question))["approveToolCall"]
    assert (second["__typename"], second["status"]) == ("RunOutcome", "COMPLETED"), second
