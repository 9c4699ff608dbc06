"""A user or group deleted (in Django's admin, by a command) takes its scope grants with it: they are removed
first, through ``services.revoke``, so that the audit trail records what the holder could see (an ``ungrant``
event by the dashboard's rule, ``Actor.rule()``) instead of rows vanishing by a database cascade."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from statestore_admin.access.actors import Actor
from statestore_admin.grants import services


@receiver(pre_delete, sender=get_user_model(), dispatch_uid="grants.user_deleted")
@receiver(pre_delete, sender=Group, dispatch_uid="grants.group_deleted")
def remove_grants(sender, instance, **kwargs):
    services.revoke(instance, everything=True, actor=Actor.rule())
