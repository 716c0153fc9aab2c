from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth import authenticate
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle
from rest_framework.views import APIView

from rlark_site.foundation.exceptions import ApplicationError, validated
from rlark_site.foundation.pagination import BoundedLimitOffsetPagination, paginated
from rlark_site.foundation.tenancy.access import (
    access_team,
    can_manage_members,
    is_platform_admin,
    require_platform_admin,
    visible_teams,
)
from rlark_site.foundation.tenancy.accounts import (
    lockout_message,
    token_create,
    token_revoke,
    tokens_of,
)
from rlark_site.foundation.tenancy.models import ApiToken, MemberRole, Membership, Team
from rlark_site.foundation.tenancy.services import member_add, team_create
from rlark_site.foundation.validators import no_control_characters


class UsernameRateThrottle(SimpleRateThrottle):
    """`auth` rate per username tried (never per address: many people share one proxy)."""

    scope = "auth"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        username = request.data.get("username") if isinstance(request.data, dict) else None
        if not isinstance(username, str) or not username:
            return None
        ident = hashlib.sha256(username.strip().lower().encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": ident}


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, style={"input_type": "password"})
    name = serializers.CharField(max_length=100, default="api", validators=[no_control_characters])
    expires_in_days = serializers.IntegerField(required=False, min_value=1, max_value=3650)


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, validators=[no_control_characters])
    expires_in_days = serializers.IntegerField(required=False, min_value=1, max_value=3650)


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "token_key", "created", "expiry"]


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text=_("the secret: shown once, stored only as a hash"))

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


def _new_token_body(token: ApiToken, secret: str) -> dict[str, Any]:
    body: dict[str, Any] = TokenSerializer(token).data
    return {**body, "token": secret}


class TokenView(APIView):
    """Username and password in, a new named, expiring token out (throttled, lockout-guarded)."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []
    throttle_classes = [UsernameRateThrottle, AnonRateThrottle]

    @extend_schema(request=TokenRequestSerializer, responses={201: NewTokenSerializer})
    def post(self, request: Request) -> Response:
        data = validated(TokenRequestSerializer(data=request.data))
        user = authenticate(request._request, username=data["username"],
                            password=data["password"])
        if user is None:
            if getattr(request._request, "axes_locked_out", False):
                raise ApplicationError(lockout_message(), status_code=429)
            raise ApplicationError(_("Wrong username or password."), status_code=400)
        token, secret = token_create(user=user, name=data["name"],
                                     expires_in_days=data.get("expires_in_days"))
        return Response(_new_token_body(token, secret), status=status.HTTP_201_CREATED)


class TokensView(APIView):
    """The caller's own tokens: list them, or create one more."""

    pagination_class = BoundedLimitOffsetPagination

    @extend_schema(responses=TokenSerializer(many=True))
    def get(self, request: Request) -> Response:
        return paginated(self, request, tokens_of(request.user), TokenSerializer)

    @extend_schema(request=TokenCreateSerializer, responses={201: NewTokenSerializer})
    def post(self, request: Request) -> Response:
        data = validated(TokenCreateSerializer(data=request.data))
        token, secret = token_create(user=request.user, name=data["name"],
                                     expires_in_days=data.get("expires_in_days"))
        return Response(_new_token_body(token, secret), status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, token_id: int) -> Response:
        token_revoke(user=request.user, token_id=token_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeTeamSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=MemberRole.choices)


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_platform_admin = serializers.BooleanField()
    teams = MeTeamSerializer(many=True, help_text=_("the teams the caller is a member of"))
    token = TokenSerializer(allow_null=True, help_text=_(
        "the API token of this request (never its secret); null for a browser session"))


class MeView(APIView):
    """Who the caller is (the CLI's `whoami`): username, teams and roles, the token in use."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        memberships = (Membership.objects.filter(user=request.user)  # type: ignore[misc]
                       .select_related("team").order_by("team__slug"))
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return Response(MeSerializer({
            "username": request.user.get_username(),
            "is_platform_admin": is_platform_admin(request.user),
            "teams": [{"slug": m.team.slug, "name": m.team.name, "role": m.role}
                      for m in memberships],
            "token": token,
        }).data)


class TeamSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["slug", "name", "created_at"]


class TeamsView(APIView):
    pagination_class = BoundedLimitOffsetPagination

    @extend_schema(responses=TeamSerializer(many=True))
    def get(self, request: Request) -> Response:
        return paginated(self, request, visible_teams(request.user).order_by("slug"),
                         TeamSerializer)

    @extend_schema(request=TeamSerializer, responses={201: TeamSerializer})
    def post(self, request: Request) -> Response:
        require_platform_admin(request.user)
        data = TeamSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = team_create(slug=data.validated_data["slug"], name=data.validated_data["name"])
        return Response(TeamSerializer(team).data, status=status.HTTP_201_CREATED)


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(
        required=False, write_only=True, allow_blank=False, style={"input_type": "password"}
    )
    role = serializers.ChoiceField(choices=MemberRole.choices, default=MemberRole.MEMBER)


class MemberOutSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["username", "role", "created_at"]


class TeamMembersView(APIView):
    pagination_class = BoundedLimitOffsetPagination

    @extend_schema(responses=MemberOutSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        team = access_team(request.user, slug)
        members = team.memberships.select_related("user").order_by("user__username")
        return paginated(self, request, members, MemberOutSerializer)

    @extend_schema(request=MemberSerializer, responses=MemberOutSerializer)
    def post(self, request: Request, slug: str) -> Response:
        team = access_team(request.user, slug)
        if not can_manage_members(request.user, team):
            raise ApplicationError(
                _("Only team maintainers and platform admins add members."), status_code=403
            )
        data = MemberSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = member_add(actor=request.user, team=team, **data.validated_data)
        return Response(MemberOutSerializer(membership).data, status=status.HTTP_201_CREATED)
