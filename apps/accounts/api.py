"""REST API for accounts: who am I, API tokens, the team."""

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import Throttled
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import selectors, services
from apps.accounts.login_limits import (
    LoginThrottle,
    client_address,
    login_failure_record,
    too_many_message,
)
from apps.accounts.permissions import portal_permission
from apps.accounts.serializers import (
    MeSerializer,
    TeamMemberSerializer,
    TokenRequestSerializer,
    TokenSerializer,
)


class MeApi(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request):
        data = {
            "username": request.user.username,
            "roles": selectors.user_roles(user=request.user),
            "permissions": sorted(request.user.get_all_permissions()),
        }
        return Response(MeSerializer(data).data)


class TokenApi(APIView):
    """Exchange a username and password for the user's API token (the same one each time, so
    other clients keep working; ``"rotate": true`` issues a new one and revokes the old).

    Failed attempts are limited per username and address (429 with Retry-After past the limit,
    see apps.accounts.login_limits)."""

    permission_classes = [AllowAny]
    authentication_classes = []
    throttle_classes = [LoginThrottle]

    def throttled(self, request, wait):
        raise Throttled(wait=wait, detail=too_many_message(int(wait)))

    @extend_schema(request=TokenRequestSerializer, responses=TokenSerializer)
    def post(self, request):
        payload = TokenRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        rotate = payload.validated_data.pop("rotate")
        user = authenticate(request, **payload.validated_data)
        if user is None:
            login_failure_record(
                username=payload.validated_data["username"], address=client_address(request)
            )
            return Response(
                {"detail": "Unknown username or wrong password."},
                status=status.HTTP_400_BAD_REQUEST,
            )
        issue = services.api_token_issue if rotate else services.api_token_get
        token = issue(user=user)
        return Response(TokenSerializer({"token": token.key}).data)


class TeamApi(generics.ListAPIView):
    permission_classes = [portal_permission("manage_team")]
    serializer_class = TeamMemberSerializer

    def get_queryset(self):
        return selectors.team_list()
