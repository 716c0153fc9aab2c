from __future__ import annotations

from django.contrib.auth import authenticate
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from rlark_site.exceptions import ApplicationError
from rlark_site.tenancy.access import (
    access_team,
    can_manage_members,
    is_platform_admin,
    visible_teams,
)
from rlark_site.tenancy.models import MemberRole, Membership, Team
from rlark_site.tenancy.services import member_add, team_create


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"})


class TokenView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(
        request=TokenRequestSerializer,
        responses=inline_serializer("Token", {"token": serializers.CharField()}),
    )
    def post(self, request: Request) -> Response:
        data = TokenRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(
            request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
        )
        if user is None:
            raise ApplicationError(_("Wrong username or password."), status_code=400)
        token, _created = Token.objects.get_or_create(user=user)
        return Response({"token": token.key})


class TeamSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["slug", "name", "created_at"]


class TeamsView(APIView):
    @extend_schema(responses=TeamSerializer(many=True))
    def get(self, request: Request) -> Response:
        teams = visible_teams(request.user).order_by("slug")
        return Response({"count": teams.count(), "results": TeamSerializer(teams, many=True).data})

    @extend_schema(request=TeamSerializer, responses=TeamSerializer)
    def post(self, request: Request) -> Response:
        if not is_platform_admin(request.user):
            raise ApplicationError(_("Only platform admins create teams."), status_code=403)
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
    @extend_schema(responses=MemberOutSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        team = access_team(request.user, slug)
        members = team.memberships.select_related("user").order_by("user__username")
        return Response(
            {"count": members.count(), "results": MemberOutSerializer(members, many=True).data}
        )

    @extend_schema(request=MemberSerializer, responses=MemberOutSerializer)
    def post(self, request: Request, slug: str) -> Response:
        team = access_team(request.user, slug)
        if not can_manage_members(request.user, team):
            raise ApplicationError(
                _("Only team maintainers and platform admins add members."), status_code=403
            )
        data = MemberSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = member_add(team=team, **data.validated_data)
        return Response(MemberOutSerializer(membership).data, status=status.HTTP_201_CREATED)
