"""ACLs: the model (model.py) and Kafka's AclAuthorizer rules (authorizer.py)."""
from .authorizer import AUTHORIZER_CLASS_NAMES, AclAuthorizer, parse_super_users
from .model import (CLUSTER_NAME, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
                    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation,
                    AclPermissionType, PatternType, ResourcePattern, ResourceType,
                    creation_error)

__all__ = ["AUTHORIZER_CLASS_NAMES", "AclAuthorizer", "parse_super_users", "CLUSTER_NAME",
           "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE", "AccessControlEntry",
           "AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType", "PatternType",
           "ResourcePattern", "ResourceType", "creation_error"]
