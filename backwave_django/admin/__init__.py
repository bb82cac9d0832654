"""The operator console in the Django admin: this package registers its pages.

Rows are read-only: nothing here edits a job or queue row directly, and schedule rows are written
only through ``operator.save_schedule`` / ``operator.remove_schedule``. State changes are operator
actions (bulk admin actions and per-object POST buttons) that go through
:mod:`backwave_django.operator`, which audits them; each is gated by its permission
(``docs/admin.md``, "Permissions"), hidden without it, answered with a message counting the
results, and logged as a Django ``LogEntry`` for the acting user. Payload, output and failure
detail are shown only with ``view_sensitive_jobrecord``, and never while
``BACKWAVE_DISABLE_SENSITIVE_DATA`` is set.

The modules: :mod:`.console` (permissions, job facts, result messages, base admins, the
operator-button gate) and :mod:`.display` (instants, short ids, badges, JSON, tags) are the kit
every page shares and import no page; :mod:`.job_list` is the job list's paginator, filters and
cells, :mod:`.job_actions` its actions on selected jobs and their confirmations, :mod:`.job_bulk`
its actions over a whole filter; one module per page (:mod:`.jobs`, :mod:`.queues`, :mod:`.limits`,
:mod:`.schedules`, :mod:`.workers`, :mod:`.observers`, :mod:`.audit`, :mod:`.dashboard`,
:mod:`.workflows`, the last with its graph layout in :mod:`.workflow_graph`) imports those and never
another page.
Registering happens here, and only here, when Django's admin autodiscovery imports this package.
"""

from __future__ import annotations

from django.contrib import admin

from ..models import (
    Dashboard,
    JobRecord,
    LimitSettings,
    Observer,
    ObserverDeadLetter,
    OperatorAudit,
    QueueSettings,
    RecurringSchedule,
    WorkerNode,
    Workflow,
)
from .audit import OperatorAuditAdmin
from .dashboard import DashboardAdmin
from .jobs import JobRecordAdmin
from .limits import LimitSettingsAdmin
from .observers import ObserverAdmin, ObserverDeadLetterAdmin
from .queues import QueueSettingsAdmin
from .schedules import RecurringScheduleAdmin
from .workers import WorkerNodeAdmin
from .workflows import WorkflowAdmin

admin.site.register(JobRecord, JobRecordAdmin)
admin.site.register(QueueSettings, QueueSettingsAdmin)
admin.site.register(LimitSettings, LimitSettingsAdmin)
admin.site.register(RecurringSchedule, RecurringScheduleAdmin)
admin.site.register(WorkerNode, WorkerNodeAdmin)
admin.site.register(OperatorAudit, OperatorAuditAdmin)
admin.site.register(Observer, ObserverAdmin)
admin.site.register(ObserverDeadLetter, ObserverDeadLetterAdmin)
admin.site.register(Dashboard, DashboardAdmin)
admin.site.register(Workflow, WorkflowAdmin)
