//! Audit event names. The names are the seed prototype's, so runs stay
//! comparable; their order in a run is documented in the README.

/// Every event type the runtime writes to `audit.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    RunStarted,
    PlanCreated,
    StateSaved,
    StepStarted,
    ResolutionPerformed,
    StepFinished,
    StepFailed,
    RetryScheduled,
    RetryAttemptStarted,
    RetryAttemptFinished,
    BudgetExhausted,
    RunFinished,
    RunResumed,
    ConditionEvaluated,
    StepSkipped,
    ApprovalRequested,
    ApprovalGranted,
    ApprovalRejected,
    ApprovalVerified,
    ReceiptLookup,
    ReceiptRecorded,
    ReceiptReused,
    ReconciliationRecorded,
    CompletionVerified,
    RunCancelled,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::RunStarted => "run_started",
            EventType::PlanCreated => "plan_created",
            EventType::StateSaved => "state_saved",
            EventType::StepStarted => "step_started",
            EventType::ResolutionPerformed => "resolution_performed",
            EventType::StepFinished => "step_finished",
            EventType::StepFailed => "step_failed",
            EventType::RetryScheduled => "retry_scheduled",
            EventType::RetryAttemptStarted => "retry_attempt_started",
            EventType::RetryAttemptFinished => "retry_attempt_finished",
            EventType::BudgetExhausted => "budget_exhausted",
            EventType::RunFinished => "run_finished",
            EventType::RunResumed => "run_resumed",
            EventType::ConditionEvaluated => "condition_evaluated",
            EventType::StepSkipped => "step_skipped",
            EventType::ApprovalRequested => "approval_requested",
            EventType::ApprovalGranted => "approval_granted",
            EventType::ApprovalRejected => "approval_rejected",
            EventType::ApprovalVerified => "approval_verified",
            EventType::ReceiptLookup => "receipt_lookup",
            EventType::ReceiptRecorded => "receipt_recorded",
            EventType::ReceiptReused => "receipt_reused",
            EventType::ReconciliationRecorded => "reconciliation_recorded",
            EventType::CompletionVerified => "completion_verified",
            EventType::RunCancelled => "run_cancelled",
        }
    }
}
